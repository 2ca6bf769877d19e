package io.lakerules;

import java.util.List;

import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.SparkPlan;

import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

/**
 * The physical side of {@link LakeStreamWrite}: when Spark executes the micro-batch, the child's
 * rows (computed once, with the batch's state, as Spark's own sinks get them) become a batch
 * DataFrame, and the planned Python action writes and commits them (lakerules.streaming.sink): data
 * files written by Spark executors, one commit on the driver.
 */
public final class LakeStreamWriteExec extends SparkPlan {
  private final LakeStreamWrite.Planned planned;
  private final SparkPlan child;
  private final String description;

  public LakeStreamWriteExec(LakeStreamWrite.Planned planned, SparkPlan child, String description) {
    this.planned = planned;
    this.child = child;
    this.description = description;
  }

  @Override
  public RDD<InternalRow> doExecute() {
    SparkSession spark = session() != null ? session() : SparkSession.active();
    RDD<InternalRow> rows = child.execute();
    Object df = spark.internalCreateDataFrame(rows, DataTypeUtils.fromAttributes(child.output()), false);
    Object result;
    try {
      result = planned.action.write(spark, df);
    } catch (RuntimeException e) {
      throw PythonBackend.orDied(e);
    }
    Object out = Bridge.unwrap(result);
    if (out != null) {
      throw new IllegalStateException("lakerules: a streaming write returned " + out.getClass().getName());
    }
    return sparkContext().emptyRDD(ClassTag$.MODULE$.apply(InternalRow.class));
  }

  @Override
  public Seq<Attribute> output() {
    return CollectionConverters.asScala(List.<Attribute>of()).toList();
  }

  @Override
  public Seq<SparkPlan> children() {
    return CollectionConverters.asScala(List.of(child)).toList();
  }

  @Override
  public SparkPlan withNewChildrenInternal(IndexedSeq<SparkPlan> newChildren) {
    return new LakeStreamWriteExec(planned, newChildren.apply(0), description);
  }

  @Override
  public String nodeName() {
    return "LakeStreamWriteExec";
  }

  @Override
  public String simpleString(int maxFields) {
    return "LakeStreamWriteExec " + description;
  }

  @Override
  public int productArity() {
    return 3;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0: return planned;
      case 1: return child;
      case 2: return description;
      default: throw new IndexOutOfBoundsException(Integer.toString(n));
    }
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof LakeStreamWriteExec;
  }
}
