package io.lakerules;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.catalyst.analysis.NamespaceAlreadyExistsException;
import org.apache.spark.sql.catalyst.analysis.NoSuchFunctionException;
import org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.catalyst.analysis.NonEmptyNamespaceException;
import org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.FunctionCatalog;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.NamespaceChange;
import org.apache.spark.sql.connector.catalog.StagedTable;
import org.apache.spark.sql.connector.catalog.StagingTableCatalog;
import org.apache.spark.sql.connector.catalog.SupportsNamespaces;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.Expressions;
import org.apache.spark.sql.connector.expressions.Literal;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import io.lakerules.functions.BucketFunction;
import io.lakerules.functions.HilbertIndexFunction;
import io.lakerules.functions.InterleaveBitsFunction;
import io.lakerules.functions.KdCellFunction;
import io.lakerules.functions.RangeIdFunction;
import io.lakerules.functions.TruncateFunction;

/**
 * spark.sql.catalog.NAME=io.lakerules.LakeCatalog. Every table and namespace operation is
 * answered by Python (a pyiceberg catalog configured from spark.sql.catalog.NAME.*); this class
 * only turns Spark's arguments into JSON and the answers back into Spark's types and exceptions.
 * It also serves the Iceberg transforms that must run per row in the JVM as functions
 * NAME.system.bucket(n, col) and NAME.system.truncate(w, col), and those OPTIMIZE ... ZORDER BY
 * needs: NAME.system.range_id(value, bounds), NAME.system.interleave_bits(bits, ids),
 * NAME.system.hilbert_index(bits, ids) and NAME.system.kd_cell(keys, tree, cuts).
 */
public final class LakeCatalog implements StagingTableCatalog, SupportsNamespaces, FunctionCatalog {
  static final ObjectMapper JSON = new ObjectMapper();
  private String name;

  @Override
  public void initialize(String name, CaseInsensitiveStringMap options) {
    this.name = name;
    Bridge.putCatalogOptions(name, new HashMap<>(options.asCaseSensitiveMap()));
  }

  @Override
  public String name() {
    return name;
  }

  // ---- the call into Python -------------------------------------------------------------

  private JsonNode call(String op, ObjectNode args) {
    try {
      String out = Bridge.backend(null).catalog(name, op, JSON.writeValueAsString(args));
      JsonNode result = JSON.readTree(out);
      if (result.has("error")) {
        throw error(result);
      }
      return result;
    } catch (java.io.IOException e) {
      throw new IllegalStateException("lakerules: malformed answer to catalog op " + op, e);
    }
  }

  /** Spark's own exception types, so that IF EXISTS / IF NOT EXISTS and messages work as for any catalog. */
  private RuntimeException error(JsonNode result) {
    String kind = result.get("error").asText();
    String message = result.path("message").asText();
    String[] ns = toStrings(result.path("namespace"));
    Identifier id = Identifier.of(ns, result.path("name").asText());
    Throwable t;
    switch (kind) {
      case "NoSuchTable": t = new NoSuchTableException(id); break;
      case "TableAlreadyExists": t = new TableAlreadyExistsException(id); break;
      case "NoSuchNamespace": t = new NoSuchNamespaceException(ns); break;
      case "NamespaceAlreadyExists": t = new NamespaceAlreadyExistsException(ns); break;
      case "NonEmptyNamespace": t = new NonEmptyNamespaceException(ns); break;
      case "Unsupported": t = new UnsupportedOperationException(message); break;
      default: t = Bridge.analysisError(message);
    }
    return Bridge.sneakyThrow(t);
  }

  private static ObjectNode args() {
    return JSON.createObjectNode();
  }

  private static ArrayNode strings(String[] parts) {
    ArrayNode a = JSON.createArrayNode();
    for (String p : parts) a.add(p);
    return a;
  }

  private static ObjectNode ident(Identifier ident) {
    ObjectNode o = args();
    o.set("namespace", strings(ident.namespace()));
    o.put("name", ident.name());
    return o;
  }

  private static ObjectNode stringMap(Map<String, String> map) {
    ObjectNode o = args();
    if (map != null) map.forEach(o::put);
    return o;
  }

  private static String[] toStrings(JsonNode array) {
    String[] out = new String[array.size()];
    for (int i = 0; i < out.length; i++) out[i] = array.get(i).asText();
    return out;
  }

  // ---- tables -----------------------------------------------------------------------------

  @Override
  public Identifier[] listTables(String[] namespace) {
    JsonNode tables = call("list_tables", (ObjectNode) args().set("namespace", strings(namespace)))
        .get("tables");
    Identifier[] out = new Identifier[tables.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = Identifier.of(toStrings(tables.get(i).get("namespace")),
          tables.get(i).get("name").asText());
    }
    return out;
  }

  @Override
  public Table loadTable(Identifier ident) {
    return table(ident, call("load_table", ident(ident)));
  }

  @Override
  public Table loadTable(Identifier ident, String version) {
    ObjectNode a = ident(ident);
    a.put("version", version);
    return table(ident, call("load_table", a));
  }

  @Override
  public Table loadTable(Identifier ident, long timestampMicros) {
    ObjectNode a = ident(ident);
    a.put("timestamp_micros", timestampMicros);
    return table(ident, call("load_table", a));
  }

  /**
   * Asked of the catalog without loading the table: a table whose metadata file is missing or
   * damaged still exists (DROP TABLE drops it, as Iceberg's catalogs do), where TableCatalog's
   * default, loadTable, would fail.
   */
  @Override
  public boolean tableExists(Identifier ident) {
    return call("table_exists", ident(ident)).path("exists").asBoolean();
  }

  @Override
  public void invalidateTable(Identifier ident) {
    call("invalidate_table", ident(ident));
  }

  @Override
  public Table createTable(Identifier ident, Column[] columns, Transform[] partitions,
      Map<String, String> properties) {
    return createTable(ident, schema(columns), partitions, properties);
  }

  @SuppressWarnings("deprecation")
  @Override
  public Table createTable(Identifier ident, StructType schema, Transform[] partitions,
      Map<String, String> properties) {
    return table(ident, call("create_table", tableArgs(ident, schema, partitions, properties)));
  }

  private static StructType schema(Column[] columns) {
    StructType schema = new StructType();
    for (Column c : columns) {
      schema = schema.add(c.name(), c.dataType(), c.nullable(), c.comment() == null ? "" : c.comment());
    }
    return schema;
  }

  private static ObjectNode tableArgs(Identifier ident, StructType schema, Transform[] partitions,
      Map<String, String> properties) {
    ObjectNode a = ident(ident);
    a.put("schema", schema.json());
    a.set("partitioning", transforms(partitions));
    a.set("properties", stringMap(properties));
    return a;
  }

  // ---- staged: REPLACE TABLE and CREATE OR REPLACE TABLE in one commit ---------------------
  // Spark plans these as AtomicReplaceTableExec for a staging catalog (else as a drop, then a
  // create: a create that fails would leave no table). The staged table holds the arguments;
  // its commit is one Python call (lakerules.iceberg.replace); nothing happens before it. AS SELECT
  // forms never get here: the rules plan them as lake commands (lakerules.write.files.run_ctas).

  @Override
  public StagedTable stageCreate(Identifier ident, Column[] columns, Transform[] partitions,
      Map<String, String> properties) {
    return stageCreate(ident, schema(columns), partitions, properties);
  }

  @SuppressWarnings("deprecation")
  @Override
  public StagedTable stageCreate(Identifier ident, StructType schema, Transform[] partitions,
      Map<String, String> properties) {
    return new Staged("create_table", ident, schema, partitions, properties);
  }

  @Override
  public StagedTable stageReplace(Identifier ident, Column[] columns, Transform[] partitions,
      Map<String, String> properties) {
    return stageReplace(ident, schema(columns), partitions, properties);
  }

  @SuppressWarnings("deprecation")
  @Override
  public StagedTable stageReplace(Identifier ident, StructType schema, Transform[] partitions,
      Map<String, String> properties) {
    return new Staged("replace_table", ident, schema, partitions, properties);
  }

  @Override
  public StagedTable stageCreateOrReplace(Identifier ident, Column[] columns, Transform[] partitions,
      Map<String, String> properties) {
    return stageCreateOrReplace(ident, schema(columns), partitions, properties);
  }

  @SuppressWarnings("deprecation")
  @Override
  public StagedTable stageCreateOrReplace(Identifier ident, StructType schema, Transform[] partitions,
      Map<String, String> properties) {
    Staged staged = new Staged("replace_table", ident, schema, partitions, properties);
    staged.args.put("or_create", true);
    return staged;
  }

  /** A create or replace Spark commits once (commitStagedChanges) or aborts (nothing to undo). */
  private final class Staged implements StagedTable {
    private final String op;
    private final Identifier ident;
    private final StructType schema;
    private final Transform[] partitions;
    private final Map<String, String> properties;
    final ObjectNode args;

    Staged(String op, Identifier ident, StructType schema, Transform[] partitions,
        Map<String, String> properties) {
      this.op = op;
      this.ident = ident;
      this.schema = schema;
      this.partitions = partitions;
      this.properties = properties;
      this.args = tableArgs(ident, schema, partitions, properties);
    }

    @Override public void commitStagedChanges() { call(op, args); }
    @Override public void abortStagedChanges() { }
    @Override public String name() { return LakeCatalog.this.name + "." + ident; }
    @SuppressWarnings("deprecation")
    @Override public StructType schema() { return schema; }
    @Override public Transform[] partitioning() { return partitions.clone(); }
    @Override public Map<String, String> properties() { return properties; }
    @Override public java.util.Set<org.apache.spark.sql.connector.catalog.TableCapability> capabilities() {
      return java.util.Collections.emptySet();
    }
  }

  @Override
  public Table alterTable(Identifier ident, TableChange... changes) {
    ObjectNode a = ident(ident);
    ArrayNode list = JSON.createArrayNode();
    for (TableChange change : changes) list.add(change(change));
    a.set("changes", list);
    return table(ident, call("alter_table", a));
  }

  @Override
  public boolean dropTable(Identifier ident) {
    return call("drop_table", ident(ident)).path("dropped").asBoolean();
  }

  @Override
  public boolean purgeTable(Identifier ident) {
    ObjectNode a = ident(ident);
    a.put("purge", true);
    return call("drop_table", a).path("dropped").asBoolean();
  }

  @Override
  public void renameTable(Identifier from, Identifier to) {
    ObjectNode a = args();
    a.set("from", ident(from));
    a.set("to", ident(to));
    call("rename_table", a);
  }

  private Table table(Identifier ident, JsonNode t) {
    Map<String, String> props = new LinkedHashMap<>();
    t.path("properties").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
    List<Transform> parts = new ArrayList<>();
    for (JsonNode p : t.path("partitioning")) parts.add(transform(p));
    StructType schema = (StructType) DataType.fromJson(t.get("schema").asText());
    // a branch or tag named as a table (lake.db.t.branch_b): the table is db.t, with its ref
    Identifier tableIdent = t.has("ref")
        ? Identifier.of(toStrings(t.get("table_namespace")), t.get("table_name").asText()) : ident;
    String ref = t.has("ref") ? t.get("ref").asText() : null;
    return new LakeTable(name, tableIdent, t.get("name").asText(), schema,
        parts.toArray(new Transform[0]), props, t.path("snapshot_id").asLong(-1), ref,
        t.path("total_records").asLong(-1));
  }

  /** Transforms as {"name": ..., "args": [{"ref": [...]}, {"lit": ...}]}, both ways. */
  private static ArrayNode transforms(Transform[] transforms) {
    ArrayNode out = JSON.createArrayNode();
    for (Transform t : transforms) {
      ObjectNode o = args();
      o.put("name", t.name());
      ArrayNode targs = JSON.createArrayNode();
      for (Expression e : t.arguments()) {
        ObjectNode arg = args();
        if (e instanceof NamedReference) {
          arg.set("ref", strings(((NamedReference) e).fieldNames()));
        } else if (e instanceof Literal) {
          arg.put("lit", String.valueOf(((Literal<?>) e).value()));
        } else {
          arg.put("expr", e.describe());
        }
        targs.add(arg);
      }
      o.set("args", targs);
      out.add(o);
    }
    return out;
  }

  private static Transform transform(JsonNode t) {
    List<Expression> targs = new ArrayList<>();
    for (JsonNode a : t.path("args")) {
      if (a.has("ref")) {
        // the name parts as they are: Expressions.column would parse them again (a quote or a
        // backtick in a column name is a syntax error there)
        targs.add(org.apache.spark.sql.connector.expressions.LogicalExpressions.reference(
            scala.jdk.javaapi.CollectionConverters.asScala(java.util.Arrays.asList(toStrings(a.get("ref")))).toList()));
      } else {
        targs.add(Expressions.literal(a.get("lit").asInt()));
      }
    }
    return Expressions.apply(t.get("name").asText(), targs.toArray(new Expression[0]));
  }

  private static ObjectNode change(TableChange c) {
    ObjectNode o = args();
    if (c instanceof TableChange.SetProperty) {
      TableChange.SetProperty s = (TableChange.SetProperty) c;
      o.put("op", "set_property").put("key", s.property()).put("value", s.value());
    } else if (c instanceof TableChange.RemoveProperty) {
      o.put("op", "remove_property").put("key", ((TableChange.RemoveProperty) c).property());
    } else if (c instanceof TableChange.AddColumn) {
      TableChange.AddColumn a = (TableChange.AddColumn) c;
      o.put("op", "add_column").put("type", a.dataType().json()).put("nullable", a.isNullable())
          .put("comment", a.comment());
      o.set("path", strings(a.fieldNames()));
      position(o, a.position());
      if (a.defaultValue() != null) {  // ADD COLUMN ... DEFAULT: the value Spark folded it to
        putDefault(o, a.defaultValue().getValue());
      }
    } else if (c instanceof TableChange.RenameColumn) {
      TableChange.RenameColumn r = (TableChange.RenameColumn) c;
      o.put("op", "rename_column").put("new_name", r.newName());
      o.set("path", strings(r.fieldNames()));
    } else if (c instanceof TableChange.DeleteColumn) {
      TableChange.DeleteColumn d = (TableChange.DeleteColumn) c;
      o.put("op", "delete_column").put("if_exists", d.ifExists());
      o.set("path", strings(d.fieldNames()));
    } else if (c instanceof TableChange.UpdateColumnType) {
      TableChange.UpdateColumnType u = (TableChange.UpdateColumnType) c;
      o.put("op", "update_column_type").put("type", u.newDataType().json());
      o.set("path", strings(u.fieldNames()));
    } else if (c instanceof TableChange.UpdateColumnNullability) {
      TableChange.UpdateColumnNullability u = (TableChange.UpdateColumnNullability) c;
      o.put("op", "update_column_nullability").put("nullable", u.nullable());
      o.set("path", strings(u.fieldNames()));
    } else if (c instanceof TableChange.UpdateColumnComment) {
      TableChange.UpdateColumnComment u = (TableChange.UpdateColumnComment) c;
      o.put("op", "update_column_comment").put("comment", u.newComment());
      o.set("path", strings(u.fieldNames()));
    } else if (c instanceof TableChange.UpdateColumnDefaultValue) {
      // ALTER COLUMN ... SET DEFAULT (the constant Spark folded it to) / DROP DEFAULT
      TableChange.UpdateColumnDefaultValue u = (TableChange.UpdateColumnDefaultValue) c;
      o.put("op", "update_column_default");
      o.set("path", strings(u.fieldNames()));
      org.apache.spark.sql.connector.catalog.DefaultValue d = u.newCurrentDefault();
      if (d != null && d.getExpression() instanceof Literal) {
        putDefault(o, (Literal<?>) d.getExpression());
      } else if (d != null) {
        o.put("default_sql", d.getSql());
      }
    } else if (c instanceof TableChange.UpdateColumnPosition) {
      TableChange.UpdateColumnPosition u = (TableChange.UpdateColumnPosition) c;
      o.put("op", "update_column_position");
      o.set("path", strings(u.fieldNames()));
      position(o, u.position());
    } else {
      o.put("op", "unsupported").put("description", c.toString())
          .put("class", c.getClass().getSimpleName());
    }
    return o;
  }

  /** A column default's value into a table change's JSON: its text, or the type Iceberg cannot hold. */
  private static void putDefault(ObjectNode o, Literal<?> value) {
    String text = defaultText(value.value(), value.dataType());
    o.put("has_default", true).put("default", text);
    if (text == null && value.value() != null) {
      o.put("default_unsupported", value.dataType().simpleString());
    }
  }

  /**
   * A column default's value (Spark's internal representation) as the text of Iceberg's
   * single-value JSON for its type: numbers and booleans as written, dates and timestamps in ISO
   * form (a timestamp with time zone in UTC with its offset), decimals plain, binaries in hex;
   * null for NULL and for a type whose default Iceberg cannot hold.
   */
  static String defaultText(Object v, org.apache.spark.sql.types.DataType t) {
    if (v == null) {
      return null;
    }
    if (t instanceof org.apache.spark.sql.types.DateType) {
      return java.time.LocalDate.ofEpochDay(((Number) v).longValue()).toString();
    }
    if (t instanceof org.apache.spark.sql.types.TimestampType || t instanceof org.apache.spark.sql.types.TimestampNTZType) {
      long us = ((Number) v).longValue();
      java.time.LocalDateTime utc = java.time.LocalDateTime.ofEpochSecond(
          Math.floorDiv(us, 1_000_000L), (int) Math.floorMod(us, 1_000_000L) * 1000, java.time.ZoneOffset.UTC);
      String text = utc.format(java.time.format.DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSSSSS"));
      return t instanceof org.apache.spark.sql.types.TimestampType ? text + "+00:00" : text;
    }
    if (v instanceof org.apache.spark.sql.types.Decimal) {
      return ((org.apache.spark.sql.types.Decimal) v).toJavaBigDecimal().toPlainString();
    }
    if (v instanceof byte[]) {
      StringBuilder hex = new StringBuilder();
      for (byte b : (byte[]) v) {
        hex.append(String.format("%02x", b));
      }
      return hex.toString();
    }
    if (v instanceof Number || v instanceof Boolean || v instanceof org.apache.spark.unsafe.types.UTF8String) {
      return v.toString();
    }
    return null;
  }

  private static void position(ObjectNode o, TableChange.ColumnPosition p) {
    if (p instanceof TableChange.First) {
      o.put("first", true);
    } else if (p instanceof TableChange.After) {
      o.put("after", ((TableChange.After) p).column());
    }
  }

  // ---- namespaces -------------------------------------------------------------------------

  @Override
  public String[][] listNamespaces() {
    return listNamespaces(new String[0]);
  }

  @Override
  public String[][] listNamespaces(String[] namespace) {
    JsonNode list = call("list_namespaces", (ObjectNode) args().set("namespace", strings(namespace)))
        .get("namespaces");
    String[][] out = new String[list.size()][];
    for (int i = 0; i < out.length; i++) out[i] = toStrings(list.get(i));
    return out;
  }

  @Override
  public boolean namespaceExists(String[] namespace) {
    return call("namespace_exists", (ObjectNode) args().set("namespace", strings(namespace)))
        .path("exists").asBoolean();
  }

  @Override
  public Map<String, String> loadNamespaceMetadata(String[] namespace) {
    JsonNode props = call("load_namespace", (ObjectNode) args().set("namespace", strings(namespace)))
        .get("properties");
    Map<String, String> out = new LinkedHashMap<>();
    props.fields().forEachRemaining(e -> out.put(e.getKey(), e.getValue().asText()));
    return out;
  }

  @Override
  public void createNamespace(String[] namespace, Map<String, String> metadata) {
    ObjectNode a = (ObjectNode) args().set("namespace", strings(namespace));
    a.set("properties", stringMap(metadata));
    call("create_namespace", a);
  }

  @Override
  public void alterNamespace(String[] namespace, NamespaceChange... changes) {
    ObjectNode a = (ObjectNode) args().set("namespace", strings(namespace));
    ObjectNode set = args();
    ArrayNode removed = JSON.createArrayNode();
    for (NamespaceChange c : changes) {
      if (c instanceof NamespaceChange.SetProperty) {
        set.put(((NamespaceChange.SetProperty) c).property(), ((NamespaceChange.SetProperty) c).value());
      } else if (c instanceof NamespaceChange.RemoveProperty) {
        removed.add(((NamespaceChange.RemoveProperty) c).property());
      }
    }
    a.set("set", set);
    a.set("remove", removed);
    call("alter_namespace", a);
  }

  @Override
  public boolean dropNamespace(String[] namespace, boolean cascade) {
    ObjectNode a = (ObjectNode) args().set("namespace", strings(namespace));
    a.put("cascade", cascade);
    return call("drop_namespace", a).path("dropped").asBoolean();
  }

  // ---- functions: the per-row Iceberg transforms ------------------------------------------

  private static final String[] SYSTEM = {"system"};

  @Override
  public Identifier[] listFunctions(String[] namespace) {
    if (Arrays.equals(namespace, SYSTEM) || namespace.length == 0) {
      return new Identifier[] {
        Identifier.of(SYSTEM, "bucket"), Identifier.of(SYSTEM, "truncate"),
        Identifier.of(SYSTEM, "range_id"), Identifier.of(SYSTEM, "interleave_bits"),
        Identifier.of(SYSTEM, "hilbert_index"), Identifier.of(SYSTEM, "kd_cell")};
    }
    return new Identifier[0];
  }

  @Override
  public UnboundFunction loadFunction(Identifier ident) throws NoSuchFunctionException {
    boolean system = ident.namespace().length == 0 || Arrays.equals(ident.namespace(), SYSTEM);
    if (system && ident.name().equalsIgnoreCase("bucket")) return new BucketFunction();
    if (system && ident.name().equalsIgnoreCase("truncate")) return new TruncateFunction();
    // OPTIMIZE ... ZORDER BY: sampled-range ids and their z-value (lakerules.optimize.curves)
    if (system && ident.name().equalsIgnoreCase("range_id")) return new RangeIdFunction();
    if (system && ident.name().equalsIgnoreCase("interleave_bits")) return new InterleaveBitsFunction();
    // ... HILBERT BY: the Hilbert-curve index; both: the file of a row in a k-d layout
    if (system && ident.name().equalsIgnoreCase("hilbert_index")) return new HilbertIndexFunction();
    if (system && ident.name().equalsIgnoreCase("kd_cell")) return new KdCellFunction();
    throw new NoSuchFunctionException(ident);
  }
}
