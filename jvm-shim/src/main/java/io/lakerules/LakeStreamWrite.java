package io.lakerules;

import java.util.List;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * One micro-batch of a streaming query written to a lake table, as the Python registry planned
 * it from Spark's WriteToMicroBatchDataSource: the batch's query as the child, and what to run
 * with its rows. Planned by {@link LakeStreamStrategy} into {@link LakeStreamWriteExec}; nothing
 * runs until Spark executes the batch.
 */
public final class LakeStreamWrite extends LogicalPlan {
  private final Planned planned;
  private final LogicalPlan query;
  private final String description;

  /** The Python action, held in a Java object (see LakeCommand.Planned). */
  public static final class Planned implements java.io.Serializable {
    final transient LakeStreamAction action;

    Planned(LakeStreamAction action) {
      this.action = action;
    }

    @Override
    public String toString() {
      return "planned";
    }
  }

  public LakeStreamWrite(Planned planned, LogicalPlan query, String description) {
    this.planned = planned;
    this.query = query;
    this.description = description;
  }

  /** Built by Python. */
  public static LakeStreamWrite create(LakeStreamAction action, LogicalPlan query, String description) {
    return new LakeStreamWrite(new Planned(action), query, description);
  }

  public Planned planned() {
    return planned;
  }

  public LogicalPlan query() {
    return query;
  }

  public String description() {
    return description;
  }

  @Override
  public Seq<Attribute> output() {
    return CollectionConverters.asScala(List.<Attribute>of()).toList();
  }

  @Override
  public Seq<LogicalPlan> children() {
    return CollectionConverters.asScala(List.of(query)).toList();
  }

  @Override
  public LogicalPlan withNewChildrenInternal(IndexedSeq<LogicalPlan> newChildren) {
    return new LakeStreamWrite(planned, newChildren.apply(0), description);
  }

  @Override
  public String nodeName() {
    return "LakeStreamWrite";
  }

  @Override
  public String simpleString(int maxFields) {
    return "LakeStreamWrite " + description;
  }

  @Override
  public int productArity() {
    return 3;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0: return planned;
      case 1: return query;
      case 2: return description;
      default: throw new IndexOutOfBoundsException(Integer.toString(n));
    }
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof LakeStreamWrite;
  }
}
