package io.lakerules;

import java.util.Arrays;
import java.util.Map;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.SupportsCatalogOptions;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.StreamSourceProvider;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import scala.jdk.javaapi.CollectionConverters;

/**
 * format("iceberg") with a table name as the path (.start("lake.db.t"), .load("lake.db.t")), as
 * Iceberg's Spark runtime takes it: the name is resolved in Spark's catalogs (its first part a
 * catalog if one is registered by that name, else the current catalog), and the table is that
 * catalog's, read and written through it as spark.table / insertInto are, with the same options
 * (spark.read.format("iceberg").load(...), df.write.format("iceberg").mode("append").save(...),
 * streams). Only a name is taken: a path of files is refused.
 */
public final class LakeSource implements SupportsCatalogOptions, DataSourceRegister, StreamSourceProvider {
  @Override
  public String shortName() {
    return "iceberg";
  }

  // ---- streaming reads: the table's appended files (LakeStreamSource) ------------------------

  @Override
  public scala.Tuple2<String, StructType> sourceSchema(SQLContext sqlContext, scala.Option<StructType> schema,
      String providerName, scala.collection.immutable.Map<String, String> parameters) {
    CaseInsensitiveStringMap options = new CaseInsensitiveStringMap(CollectionConverters.asJava(parameters));
    return new scala.Tuple2<>(shortName(), LakeStreamSource.streamSchema(getTable(options).schema(), options));
  }

  @Override
  public Source createSource(SQLContext sqlContext, String metadataPath, scala.Option<StructType> schema,
      String providerName, scala.collection.immutable.Map<String, String> parameters) {
    CaseInsensitiveStringMap options = new CaseInsensitiveStringMap(CollectionConverters.asJava(parameters));
    Table table = getTable(options);
    if (!(table instanceof LakeTable)) {
      throw Bridge.sneakyThrow(Bridge.analysisError("lakerules: " + options.get("path")
          + " is not a lake table; format(\"iceberg\") streams lake tables"));
    }
    LakeTable t = (LakeTable) table;
    String[] ident = new String[t.namespace().length + 1];
    System.arraycopy(t.namespace(), 0, ident, 0, t.namespace().length);
    ident[ident.length - 1] = t.tableName();
    return new LakeStreamSource((org.apache.spark.sql.classic.SparkSession) sqlContext.sparkSession(),
        t.catalogName(), ident, CollectionConverters.asJava(parameters),
        schema.isDefined() ? schema.get() : LakeStreamSource.streamSchema(t.schema(), options));
  }

  /** The v1 view of a lake table Spark uses to stream it (readStream.table): provider iceberg,
   * the table's quoted name as its path. */
  static org.apache.spark.sql.catalyst.catalog.CatalogTable catalogTable(String catalog, String[] namespace,
      String name, StructType schema) {
    StringBuilder path = new StringBuilder(quote(catalog));
    for (String n : namespace) path.append('.').append(quote(n));
    path.append('.').append(quote(name));
    scala.collection.immutable.Map<String, String> props =
        new scala.collection.immutable.HashMap<String, String>().updated("path", path.toString());
    org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat storage = CaseClasses.build(
        org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat$.MODULE$,
        scala.Option.empty(), scala.Option.empty(), scala.Option.empty(), scala.Option.empty(), false, props);
    org.apache.spark.sql.catalyst.TableIdentifier id = new org.apache.spark.sql.catalyst.TableIdentifier(name,
        scala.Option.apply(String.join(".", namespace)), scala.Option.apply(catalog));
    return CaseClasses.build(org.apache.spark.sql.catalyst.catalog.CatalogTable$.MODULE$, id,
        org.apache.spark.sql.catalyst.catalog.CatalogTableType.EXTERNAL(), storage, schema,
        scala.Option.apply("iceberg"));
  }

  private static String quote(String part) {
    return "`" + part.replace("`", "``") + "`";
  }

  private static String[] parts(CaseInsensitiveStringMap options) {
    String path = options.get("path");
    if (path == null || path.isEmpty()) {
      throw Bridge.sneakyThrow(Bridge.analysisError(
          "lakerules: format(\"iceberg\") needs a table name, as in .start(\"lake.db.t\") or .load(\"lake.db.t\")"));
    }
    if (path.contains("/") || path.contains(":")) {
      throw Bridge.sneakyThrow(Bridge.analysisError("lakerules: format(\"iceberg\") takes a table name "
          + "(catalog.db.table), not a file path: " + path));
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
