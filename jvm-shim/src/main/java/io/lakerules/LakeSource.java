package io.lakerules;

import java.util.Arrays;
import java.util.Map;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.SupportsCatalogOptions;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import scala.jdk.javaapi.CollectionConverters;

/**
 * format("iceberg") with a table name as the path (.start("lake.db.t"), .load("lake.db.t")), as
 * Iceberg's Spark runtime takes it: the name is resolved in Spark's catalogs (its first part a
 * catalog if one is registered by that name, else the current catalog), and the table is that
 * catalog's. Only a name is taken: a path of files is refused.
 */
public final class LakeSource implements SupportsCatalogOptions, DataSourceRegister {
  @Override
  public String shortName() {
    return "iceberg";
  }

  private static String[] parts(CaseInsensitiveStringMap options) {
    String path = options.get("path");
    if (path == null || path.isEmpty()) {
      throw Bridge.sneakyThrow(Bridge.analysisError(
          "lakerules: format(\"iceberg\") needs a table name, as in .start(\"lake.db.t\") or .load(\"lake.db.t\")"));
    }
    if (path.contains("/")) {
      throw Bridge.sneakyThrow(Bridge.analysisError("lakerules: format(\"iceberg\") takes a table name, not a path: "
          + path));
    }
    SparkSession session = SparkSession.active();
    try {
      return CollectionConverters.asJava(session.sessionState().sqlParser().parseMultipartIdentifier(path))
          .toArray(new String[0]);
    } catch (Exception e) {
      throw Bridge.sneakyThrow(e);
    }
  }

  private static boolean isCatalog(String name) {
    return SparkSession.active().sessionState().catalogManager().isCatalogRegistered(name);
  }

  @Override
  public String extractCatalog(CaseInsensitiveStringMap options) {
    String[] p = parts(options);
    if (p.length > 1 && isCatalog(p[0])) {
      return p[0];
    }
    return SparkSession.active().sessionState().catalogManager().currentCatalog().name();
  }

  @Override
  public Identifier extractIdentifier(CaseInsensitiveStringMap options) {
    String[] p = parts(options);
    if (p.length > 1 && isCatalog(p[0])) {
      p = Arrays.copyOfRange(p, 1, p.length);
    }
    if (p.length < 2) {
      throw Bridge.sneakyThrow(Bridge.analysisError("lakerules: format(\"iceberg\"): name the table as "
          + "[catalog.]namespace.table, not " + options.get("path")));
    }
    return Identifier.of(Arrays.copyOfRange(p, 0, p.length - 1), p[p.length - 1]);
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return getTable(options).schema();
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return getTable(new CaseInsensitiveStringMap(properties));
  }

  private Table getTable(CaseInsensitiveStringMap options) {
    String catalog = extractCatalog(options);
    Object c = SparkSession.active().sessionState().catalogManager().catalog(catalog);
    if (!(c instanceof TableCatalog)) {
      throw Bridge.sneakyThrow(Bridge.analysisError("lakerules: catalog " + catalog + " has no tables"));
    }
    try {
      return ((TableCatalog) c).loadTable(extractIdentifier(options));
    } catch (Exception e) {
      throw Bridge.sneakyThrow(e);
    }
  }
}
