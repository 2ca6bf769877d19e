package io.lakerules;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.CatalystTypeConverters$;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.trees.TreePattern$;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.execution.command.LeafRunnableCommand;
import org.apache.spark.sql.types.StructType;

import scala.Function1;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A lake statement as Spark plans it: a leaf command that holds what the Python registry
 * planned (a {@link LakeAction}) and the statement's result columns. Spark calls {@link #run}
 * once, when it executes the statement (ExecutedCommandExec); analyzing, optimizing or
 * explaining a plan that holds it runs nothing. Delta's DeleteCommand is the same shape.
 *
 * <p>Written in Java against Scala traits: TreeNode's Product methods and the trait members
 * whose Scala defaults a Java class does not inherit are spelled out here.
 */
public final class LakeCommand extends LogicalPlan implements LeafRunnableCommand {
  private final Planned planned;
  private final Seq<Attribute> output;
  private final String description;

  /**
   * The Python action, held in a Java object: Spark compares and prints a node's fields
   * (equals, hashCode, toString), which on a Py4J proxy would be calls into Python.
   */
  public static final class Planned {
    final LakeAction action;

    Planned(LakeAction action) {
      this.action = action;
    }

    @Override
    public String toString() {
      return "planned";
    }
  }

  /** The constructor TreeNode.makeCopy finds: one argument per product element, in order. */
  public LakeCommand(Planned planned, Seq<Attribute> output, String description) {
    this.planned = planned;
    this.output = output;
    this.description = description;
  }

  /** Built by Python: resultDdl is lakerules' own fixed result schema ("" for none). */
  public static LakeCommand create(LakeAction action, String resultDdl, String description) {
    StructType schema = resultDdl == null || resultDdl.isEmpty()
        ? new StructType() : StructType.fromDDL(resultDdl);
    @SuppressWarnings("unchecked")
    Seq<Attribute> attributes = (Seq<Attribute>) (Seq<?>) DataTypeUtils.toAttributes(schema);
    return new LakeCommand(new Planned(action), attributes, description);
  }

  /** What EXPLAIN shows: the planned command, as the registry describes it. */
  public String description() {
    return description;
  }

  @Override
  public Seq<Row> run(SparkSession session) {
    Object result;
    try {
      result = planned.action.run(session);
    } catch (RuntimeException e) {
      throw PythonBackend.orDied(e);
    }
    Object out = Bridge.unwrap(result);
    List<Row> rows = new ArrayList<>();
    if (out instanceof LocalRelation) {
      StructType schema = DataTypeUtils.fromAttributes(output);
      Function1<Object, Object> toRow = CatalystTypeConverters$.MODULE$.createToScalaConverter(schema);
      scala.collection.Iterator<InternalRow> it = ((LocalRelation) out).data().iterator();
      while (it.hasNext()) {
        rows.add((Row) toRow.apply(it.next()));
      }
    } else if (out != null) {
      throw new IllegalStateException("lakerules: a command returned " + out.getClass().getName()
          + ", not its result rows");
    }
    return CollectionConverters.asScala(rows).toList();
  }

  // ---- the plan node ------------------------------------------------------------------------

  @Override
  public Seq<Attribute> output() {
    return output;
  }

  @Override
  public AttributeSet producedAttributes() {
    return outputSet();
  }

  @Override
  public Seq<LogicalPlan> children() {
    return CollectionConverters.asScala(List.<LogicalPlan>of()).toList();
  }

  @Override
  public LogicalPlan withNewChildrenInternal(IndexedSeq<LogicalPlan> newChildren) {
    return this;
  }

  @Override
  public Seq<scala.Enumeration.Value> nodePatterns() {
    return CollectionConverters.asScala(List.of(TreePattern$.MODULE$.COMMAND())).toList();
  }

  @Override
  public void org$apache$spark$sql$catalyst$plans$logical$Command$_setter_$nodePatterns_$eq(
      Seq<scala.Enumeration.Value> value) {
    // Command's val, set by Scala classes' constructors: nodePatterns() answers it here.
  }

  @Override
  public String nodeName() {
    return "LakeCommand";
  }

  @Override
  public String simpleString(int maxFields) {
    return "LakeCommand " + description;
  }

  @Override
  public String verboseString(int maxFields) {
    return simpleString(maxFields);
  }

  @Override
  public String simpleStringWithNodeId() {
    return simpleString(0);
  }

  @Override
  public int productArity() {
    return 3;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0: return planned;
      case 1: return output;
      case 2: return description;
      default: throw new IndexOutOfBoundsException(Integer.toString(n));
    }
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof LakeCommand;
  }
}
