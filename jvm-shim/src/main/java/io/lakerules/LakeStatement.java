package io.lakerules;

import java.util.List;

import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.OneRowRelation;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A statement lakerules parsed (OPTIMIZE, CALL, partition evolution, ...), as data, waiting for
 * Spark to resolve its table: the child is the table as the statement named it (an
 * UnresolvedRelation Spark resolves as it would for its own statement; OneRowRelation for a
 * statement on a catalog, such as CALL), the payload the statement's arguments as JSON
 * (lakerules.plan.statements). The registry turns it into a planned command right after
 * analysis (lakerules.plan.convert.from_jvm); Spark may analyze one parsed plan several times
 * (Spark Connect, views, EXPLAIN), and each analysis reads the same data. It never runs itself.
 */
public final class LakeStatement extends LogicalPlan {
  private final LogicalPlan child;
  private final String payload;

  /** The constructor TreeNode.makeCopy finds: one argument per product element, in order. */
  public LakeStatement(LogicalPlan child, String payload) {
    this.child = child;
    this.payload = payload;
  }

  /** Built by Python (lakerules.spark.jvm.statement_node): the table's name parts, or null. */
  public static LakeStatement of(List<String> table, String payload) {
    LogicalPlan child = table == null
        ? new OneRowRelation()
        : new UnresolvedRelation(CollectionConverters.asScala(table).toList(),
            CaseInsensitiveStringMap.empty(), false);
    return new LakeStatement(child, payload);
  }

  public LogicalPlan child() {
    return child;
  }

  public String payload() {
    return payload;
  }

  @Override
  public Seq<Attribute> output() {
    return CollectionConverters.asScala(List.<Attribute>of()).toList();
  }

  @Override
  public Seq<LogicalPlan> children() {
    return CollectionConverters.asScala(List.of(child)).toList();
  }

  @Override
  public LogicalPlan withNewChildrenInternal(IndexedSeq<LogicalPlan> newChildren) {
    return new LakeStatement(newChildren.head(), payload);
  }

  @Override
  public String nodeName() {
    return "LakeStatement";
  }

  @Override
  public String simpleString(int maxFields) {
    return "LakeStatement " + payload;
  }

  @Override
  public int productArity() {
    return 2;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0: return child;
      case 1: return payload;
      default: throw new IndexOutOfBoundsException(Integer.toString(n));
    }
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof LakeStatement;
  }
}
