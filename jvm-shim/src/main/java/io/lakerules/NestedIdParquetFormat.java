package io.lakerules;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.Job;
import org.apache.parquet.hadoop.ParquetOutputFormat;
import org.apache.parquet.hadoop.api.WriteSupport;
import org.apache.parquet.schema.GroupType;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.Type;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.datasources.OutputWriterFactory;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.parquet.ParquetWriteSupport;
import org.apache.spark.sql.types.StructType;

/**
 * Spark's Parquet writer, with Iceberg's field ids on list elements and map keys and values too.
 * Spark writes the field id a StructField's metadata carries (spark.sql.parquet.fieldId.write),
 * but an array's element and a map's key and value are no StructFields, so their Parquet fields
 * get none; Iceberg's readers resolve columns by id (DuckDB reads such a list as NULLs and fails on
 * such a map). The option {@code lakerules.nestedids} gives those ids as a tree over the columns
 * (lakerules.iceberg.schema.nested_ids): {"f": {name: node}} for a struct, {"e": id, "t": node} for a
 * list, {"k": id, "v": id, "kt": node, "vt": node} for a map. The write support adds them to the
 * schema Spark derives, which is otherwise unchanged (the writers Spark built for it still fit).
 * Lists and maps are written in the standard three-level form the Iceberg spec asks for, whatever
 * spark.sql.parquet.writeLegacyFormat says.
 */
public class NestedIdParquetFormat extends ParquetFileFormat {
  public static final String OPTION = SharedNames.NESTED_IDS_OPTION;  // lower case: Spark lower-cases option names

  @Override
  public OutputWriterFactory prepareWrite(SparkSession session, Job job,
      scala.collection.immutable.Map<String, String> options, StructType dataSchema) {
    OutputWriterFactory factory = super.prepareWrite(session, job, options, dataSchema);
    Configuration conf = job.getConfiguration();
    conf.set("spark.sql.parquet.writeLegacyFormat", "false");
    scala.Option<String> ids = options.get(OPTION);
    if (ids.isDefined()) conf.set(OPTION, ids.get());
    conf.setClass(ParquetOutputFormat.WRITE_SUPPORT_CLASS, WithIds.class, WriteSupport.class);
    return factory;
  }

  @Override
  public String toString() {
    return "Parquet (with nested field ids)";
  }

  /** Spark's write support, its file schema given the nested ids. */
  public static class WithIds extends ParquetWriteSupport {
    @Override
    public WriteContext init(Configuration conf) {
      WriteContext context = super.init(conf);
      String ids = conf.get(OPTION);
      if (ids == null || ids.isEmpty()) return context;
      MessageType schema = context.getSchema();
      try {
        JsonNode tree = new ObjectMapper().readTree(ids);
        GroupType root = (GroupType) apply(schema, tree);
        return new WriteContext(new MessageType(schema.getName(), root.getFields()), context.getExtraMetaData());
      } catch (IOException e) {
        throw new UncheckedIOException("lakerules: unreadable " + OPTION + " option: " + ids, e);
      }
    }
  }

  static Type apply(Type type, JsonNode node) {
    if (node == null || node.isNull() || type.isPrimitive()) return type;
    GroupType group = type.asGroupType();
    if (node.has("f")) {
      List<Type> fields = new ArrayList<>();
      for (Type field : group.getFields()) fields.add(apply(field, node.get("f").get(field.getName())));
      return group.withNewFields(fields);
    }
    if (node.has("e")) {  // <list> { repeated group list { <element> } }
      GroupType repeated = group.getType(0).asGroupType();
      Type element = apply(repeated.getType(0), node.get("t")).withId(node.get("e").asInt());
      return group.withNewFields(List.of(repeated.withNewFields(List.of(element))));
    }
    if (node.has("k")) {  // <map> { repeated group key_value { <key> <value> } }
      GroupType repeated = group.getType(0).asGroupType();
      Type key = apply(repeated.getType(0), node.get("kt")).withId(node.get("k").asInt());
      Type value = apply(repeated.getType(1), node.get("vt")).withId(node.get("v").asInt());
      return group.withNewFields(List.of(repeated.withNewFields(List.of(key, value))));
    }
    return type;
  }
}
