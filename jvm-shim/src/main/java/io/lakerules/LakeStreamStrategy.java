package io.lakerules;

import java.util.List;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/** Plans {@link LakeStreamWrite} into {@link LakeStreamWriteExec}; nothing else. */
final class LakeStreamStrategy extends SparkStrategy {
  @Override
  public Seq<SparkPlan> apply(LogicalPlan plan) {
    if (plan instanceof LakeStreamWrite) {
      LakeStreamWrite w = (LakeStreamWrite) plan;
      SparkPlan exec = new LakeStreamWriteExec(w.planned(), planLater(w.query()), w.description());
      return CollectionConverters.asScala(List.of(exec)).toList();
    }
    return CollectionConverters.asScala(List.<SparkPlan>of()).toList();
  }
}
