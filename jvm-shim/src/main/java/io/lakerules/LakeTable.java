package io.lakerules;

import java.util.Collections;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.MetadataColumn;
import org.apache.spark.sql.connector.catalog.SupportsMetadataColumns;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.V2TableWithV1Fallback;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;

/**
 * A lake table as Spark's analyzer sees it: name, schema, partitioning, properties, and the
 * snapshot it was loaded at. It reads and writes nothing itself; the Python rules replace every
 * relation over it before Spark plans execution. It is SupportsWrite with STREAMING_WRITE so that
 * DataStreamWriter.toTable accepts it; each micro-batch's write is then replaced by the registry
 * (lakerules.streaming.sink).
 */
public final class LakeTable
    implements Table, SupportsWrite, SupportsRead, SupportsMetadataColumns, V2TableWithV1Fallback {
  private final String catalogName;
  private final Identifier ident;
  private final String name;
  private final StructType schema;
  private final Transform[] partitioning;
  private final Map<String, String> properties;
  private final long snapshotId;
  private final String ref;
  private final long totalRecords;

  LakeTable(String catalogName, Identifier ident, String name, StructType schema,
      Transform[] partitioning, Map<String, String> properties, long snapshotId, String ref,
      long totalRecords) {
    this.catalogName = catalogName;
    this.ident = ident;
    this.name = name;
    this.schema = schema;
    this.partitioning = partitioning;
    this.properties = Collections.unmodifiableMap(properties);
    this.snapshotId = snapshotId;
    this.ref = ref;
    this.totalRecords = totalRecords;
  }

  public String catalogName() { return catalogName; }
  public String[] namespace() { return ident.namespace(); }
  public String tableName() { return ident.name(); }
  /** The snapshot this table was loaded at, or -1 when the table has none yet. */
  public long snapshotId() { return snapshotId; }
  /**
   * The branch or tag this table was named with (lake.db.t.branch_b: "branch:b"; lake.db.t.tag_v:
   * "tag:v"), or null: the table itself. The identifier is then the table's (db.t).
   */
  public String ref() { return ref; }

  @Override public String name() { return name; }
  @SuppressWarnings("deprecation")
  @Override public StructType schema() { return schema; }
  @Override public Transform[] partitioning() { return partitioning.clone(); }
  @Override public Map<String, String> properties() { return properties; }

  /**
   * Readable, so that spark.read.format("iceberg").load(name) (LakeSource) makes a relation over
   * it as spark.table does; the rules plan every such relation's scan before Spark would ask this.
   * What Spark gets here reports the table's statistics (DESCRIBE TABLE EXTENDED asks for them)
   * and refuses to read.
   */
  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    return new LakeStatisticsScan(name, schema, totalRecords);
  }

  /**
   * Iceberg format version 3's row lineage, as the spec names its metadata columns: a row's id
   * ({@code _row_id}) and the data sequence number of the commit that last changed it
   * ({@code _last_updated_sequence_number}); selectable by name (SELECT _row_id, * FROM t), never
   * part of SELECT *. Other tables have none. The scan computes them
   * (lakerules.scan.lineage); a data column of the same name hides them (Spark's rule).
   */
  @Override
  public MetadataColumn[] metadataColumns() {
    if (!"3".equals(properties.get("format-version"))) return new MetadataColumn[0];
    return new MetadataColumn[] {
        new LineageColumn("_row_id", "the row's id (Iceberg v3 row lineage)"),
        new LineageColumn("_last_updated_sequence_number",
            "the data sequence number of the commit that last added or updated the row (Iceberg v3 row lineage)")};
  }

  private static final class LineageColumn implements MetadataColumn {
    private final String name;
    private final String comment;

    LineageColumn(String name, String comment) {
      this.name = name;
      this.comment = comment;
    }

    @Override public String name() { return name; }
    @Override public org.apache.spark.sql.types.DataType dataType() { return org.apache.spark.sql.types.DataTypes.LongType; }
    @Override public boolean isNullable() { return true; }
    @Override public String comment() { return comment; }
  }

  @Override
  public Set<TableCapability> capabilities() {
    return EnumSet.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE,
        TableCapability.TRUNCATE, TableCapability.OVERWRITE_BY_FILTER,
        TableCapability.OVERWRITE_DYNAMIC, TableCapability.STREAMING_WRITE);
  }

  /**
   * What Spark streams a lake table through (readStream.table): a v1 view whose provider is
   * iceberg, so that the stream's source is io.lakerules.LakeSource's (LakeStreamSource).
   */
  @Override
  public org.apache.spark.sql.catalyst.catalog.CatalogTable v1Table() {
    return LakeSource.catalogTable(catalogName, ident.namespace(), ident.name(), schema);
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return new LakeStreamingWriteBuilder(name);
  }

  /**
   * Two loads of one table at one snapshot, with one schema, partitioning and properties, are
   * the same table: Spark matches cached plans (CACHE TABLE, df.cache()) against new queries by
   * comparing their relations, and each query loads the table afresh.
   */
  @Override
  public boolean equals(Object o) {
    if (this == o) return true;
    if (!(o instanceof LakeTable)) return false;
    LakeTable t = (LakeTable) o;
    return snapshotId == t.snapshotId && java.util.Objects.equals(ref, t.ref) && catalogName.equals(t.catalogName) && ident.equals(t.ident)
        && name.equals(t.name) && schema.equals(t.schema) && properties.equals(t.properties)
        && describe(partitioning).equals(describe(t.partitioning));
  }

  @Override
  public int hashCode() {
    return java.util.Objects.hash(catalogName, ident, snapshotId, schema);
  }

  private static java.util.List<String> describe(Transform[] transforms) {
    java.util.List<String> out = new java.util.ArrayList<>();
    for (Transform t : transforms) out.add(t.describe());
    return out;
  }

  @Override
  public String toString() {
    return "LakeTable(" + name + (ref != null ? ", " + ref : "") + (snapshotId >= 0 ? ", snapshot=" + snapshotId : "") + ")";
  }
}
