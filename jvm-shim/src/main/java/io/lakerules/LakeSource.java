package io.lakerules;

import java.util.List;
import java.util.Map;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.SupportsCatalogOptions;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * format("iceberg") as Iceberg's runtime accepts it: spark.read.format("iceberg").load("lake.db.t")
 * and df.write.format("iceberg").mode("append").save("lake.db.t"). The path is a table name
 * (catalog optional, the current catalog otherwise); Spark then loads and writes the table through
 * its catalog, as for spark.table / insertInto, with the same read and write options. A file
 * path is refused: lake tables are named through their catalog.
 */
public final class LakeSource implements DataSourceRegister, SupportsCatalogOptions {
  @Override public String shortName() { return "iceberg"; }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    throw Bridge.sneakyThrow(Bridge.analysisError(
        "lakerules: format(\"iceberg\") needs a table name: load(\"catalog.db.table\") or save(\"catalog.db.table\")"));
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    throw Bridge.sneakyThrow(Bridge.analysisError(
        "lakerules: format(\"iceberg\") with a schema is not supported: the table's schema is its own"));
  }

  private static List<String> parts(CaseInsensitiveStringMap options) {
    String path = options.get("path");
    if (path == null || path.isEmpty()) {
      throw Bridge.sneakyThrow(Bridge.analysisError(
          "lakerules: format(\"iceberg\") needs a table name: load(\"catalog.db.table\") or save(\"catalog.db.table\")"));
    }
    if (path.contains("/") || path.contains(":")) {
      throw Bridge.sneakyThrow(Bridge.analysisError("lakerules: format(\"iceberg\") takes a table name (catalog.db.table), "
          + "not a file path: " + path));
    }
    SparkSession spark = SparkSession.active();
    try {
      return scala.jdk.javaapi.CollectionConverters.asJava(spark.sessionState().sqlParser().parseMultipartIdentifier(path));
    } catch (Exception e) {
      throw Bridge.sneakyThrow(e);  // Spark's own ParseException, naming the position
    }
  }

  private static boolean namesCatalog(List<String> parts) {
    return parts.size() > 2 && SparkSession.active().sessionState().catalogManager().isCatalogRegistered(parts.get(0));
  }

  @Override
  public Identifier extractIdentifier(CaseInsensitiveStringMap options) {
    List<String> p = parts(options);
    if (namesCatalog(p)) p = p.subList(1, p.size());
    if (p.size() < 2) {
      throw Bridge.sneakyThrow(Bridge.analysisError(
          "lakerules: format(\"iceberg\") needs namespace.table (or catalog.namespace.table), not " + options.get("path")));
    }
    return Identifier.of(p.subList(0, p.size() - 1).toArray(new String[0]), p.get(p.size() - 1));
  }

  @Override
  public String extractCatalog(CaseInsensitiveStringMap options) {
    List<String> p = parts(options);
    if (namesCatalog(p)) return p.get(0);
    return SparkSession.active().sessionState().catalogManager().currentCatalog().name();
  }
}
