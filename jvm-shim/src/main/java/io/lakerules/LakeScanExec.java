package io.lakerules;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.PriorityQueue;
import java.lang.invoke.MethodHandles;
import java.lang.reflect.Constructor;

import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.FileSourceOptions;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;
import org.apache.spark.sql.execution.datasources.FilePartition;
import org.apache.spark.sql.execution.datasources.FileScanRDD;
import org.apache.spark.sql.execution.datasources.FileSourceStrategy$;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitionedFile;

import org.apache.xbean.asm9.ClassWriter;
import org.apache.xbean.asm9.Label;
import org.apache.xbean.asm9.MethodVisitor;
import org.apache.xbean.asm9.Opcodes;
import org.apache.xbean.asm9.Type;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A lake table's file scan: Spark's own FileSourceScanExec (the same reader, pushed filters,
 * metrics, columnar batches, code generation and explain output), its read tasks weighed by rows
 * instead of bytes.
 *
 * <p>Spark packs files into tasks by bytes plus an open cost of 4 MiB a file
 * (spark.sql.files.openCostInBytes). A table that changed all day holds a few large, well
 * compressed files and many small ones (each CDC batch adds one): 9 files of 1M rows (1.3 MiB
 * each) and 100 of 10,000 rows weigh 48 MiB and 400 MiB to Spark, so one task got 9.2M of 10M
 * rows and three others the rest, on 2 cores. The manifests know each file's rows
 * ({@link LakeFileIndex#rowsOf}): the same splits Spark cut (row-group ranges of large files) are
 * dealt into as many tasks as their bytes need (see {@link #plan}) so that the cores end together,
 * a split weighing its share of the file's rows
 * plus {@link #OPEN_ROWS} for opening it. Spark's own tasks are kept when they would end within
 * {@link #TOLERANCE} of the dealt ones ({@link #plan}), when a file's rows are unknown, and when
 * Parquet's reader filters rows ({@link #filtered}).
 *
 * <p>The node is a subclass of FileSourceScanExec whose {@code inputRDD} deals the tasks. Java
 * cannot declare that subclass (javac rejects the bridge methods Scala's case class and trait
 * mixins leave), so it is written as bytecode once per JVM ({@link Generated}); its constructor
 * takes the case class's fields, read from the scan Spark planned, so it follows the installed
 * Spark's signature. Where the class cannot be made, and for scans read row by row (see
 * {@link #of}), scans stay Spark's own.
 */
public final class LakeScanExec {
  /**
   * A split's open cost counted in rows: a footer read and a reader set up, ~2 ms on the machine
   * of bench/RESULTS.md, where 2 columns of 1M rows in one file read in ~0.2 s (100 files of 10,000
   * rows: ~0.4 s).
   */
  static final long OPEN_ROWS = 16_384;
  /** Spark's tasks are kept unless they end more than this much later than the dealt ones. */
  static final double TOLERANCE = 1.1;

  private LakeScanExec() {
  }

  /**
   * The scan as the generated subclass (same fields), or the scan itself where that is not
   * possible, and for a scan read row by row: Spark's row path ships the scan node itself to the
   * executors (its closure converting rows), and a class written at run time exists only in the
   * driver's JVM. A columnar scan's tasks carry only its reader and metrics.
   */
  static SparkPlan of(FileSourceScanExec s) {
    Constructor<?> make = Generated.CONSTRUCTOR;
    if (make == null || make.getParameterCount() != s.productArity() || !s.supportsColumnar()) {
      return s;
    }
    Object[] fields = new Object[s.productArity()];
    for (int i = 0; i < fields.length; i++) {
      fields[i] = s.productElement(i);
    }
    try {
      return (SparkPlan) make.newInstance(fields);
    } catch (ReflectiveOperationException | IllegalArgumentException e) {
      return s;
    }
  }

  /** Whether a plan node is already a lake scan of the generated class (the strategy swaps the others). */
  public static boolean isBalanced(Object plan) {
    return Generated.CONSTRUCTOR != null && Generated.CONSTRUCTOR.getDeclaringClass().isInstance(plan);
  }

  /** The generated subclass's inputRDD: Spark's read RDD, its tasks dealt by rows when that helps. */
  public static RDD<InternalRow> balance(FileSourceScanExec exec, RDD<InternalRow> rdd) {
    HadoopFsRelation relation = exec.relation();
    if (!(rdd instanceof FileScanRDD) || !(relation.location() instanceof LakeFileIndex) || filtered(exec)) {
      return rdd;
    }
    FileScanRDD scan = (FileScanRDD) rdd;
    LakeFileIndex index = (LakeFileIndex) relation.location();
    List<FilePartition> parts = CollectionConverters.asJava(scan.filePartitions());
    int cores = ((org.apache.spark.sql.classic.SparkSession) relation.sparkSession()).leafNodeDefaultParallelism();
    List<FilePartition> dealt = deal(parts, index, cores, relation.sparkSession().sessionState().conf().filesMaxPartitionBytes());
    if (dealt == null) {
      return rdd;
    }
    return new FileScanRDD(relation.sparkSession(),
        scan.org$apache$spark$sql$execution$datasources$FileScanRDD$$readFunction,
        CollectionConverters.asScala(dealt).toList(), scan.readSchema(), scan.metadataColumns(),
        scan.org$apache$spark$sql$execution$datasources$FileScanRDD$$metadataExtractors,
        new FileSourceOptions(relation.options()));
  }

  /**
   * Whether Parquet's reader is given conditions of the scan to filter rows by (other than IS NOT
   * NULL): then the row groups its statistics skip cost no rows, the manifests' counts say
   * nothing of the work (a point query opens every file and reads one row group), and Spark's
   * tasks, which count files, are kept. Conditions Parquet cannot take (an equality delete set's
   * probe) filter rows after they are read, and weigh nothing here.
   */
  private static boolean filtered(FileSourceScanExec exec) {
    for (org.apache.spark.sql.sources.Filter f : CollectionConverters.asJava(exec.pushedDownFilters())) {
      if (!(f instanceof org.apache.spark.sql.sources.IsNotNull)) {
        return true;
      }
    }
    return false;
  }

  /** The splits dealt by rows (see the class comment), or null to keep Spark's tasks. */
  static List<FilePartition> deal(List<FilePartition> parts, LakeFileIndex index, int cores, long maxBytes) {
    if (parts.size() < 2 || cores < 1) {
      return null;
    }
    long bytes = 0;
    List<PartitionedFile> splits = new ArrayList<>();
    List<Long> weights = new ArrayList<>();
    List<int[]> sparks = new ArrayList<>();
    for (FilePartition p : parts) {
      int[] task = new int[p.files().length];
      for (int j = 0; j < task.length; j++) {
        PartitionedFile f = p.files()[j];
        long rows = index.rowsOf(f.urlEncodedPath());
        if (rows < 0 || f.fileSize() <= 0) {
          return null;
        }
        task[j] = splits.size();
        splits.add(f);
        bytes += f.length();
        weights.add(OPEN_ROWS + (long) (rows * Math.min(1.0, (double) f.length() / f.fileSize())));
      }
      sparks.add(task);
    }
    long[] w = weights.stream().mapToLong(Long::longValue).toArray();
    List<int[]> tasks = plan(w, sparks, cores, (int) Math.min(Integer.MAX_VALUE, (bytes + maxBytes - 1) / Math.max(maxBytes, 1)));
    if (tasks == null) {
      return null;
    }
    List<FilePartition> out = new ArrayList<>(tasks.size());
    for (int[] task : tasks) {
      PartitionedFile[] files = new PartitionedFile[task.length];
      for (int j = 0; j < task.length; j++) {
        files[j] = splits.get(task[j]);
      }
      out.add(new FilePartition(out.size(), files));
    }
    return out;
  }

  /**
   * Tasks for splits of weights {@code w} on {@code cores} slots, or null to keep Spark's
   * ({@code sparks}: the splits of each of its tasks). As many tasks as the splits' bytes need at
   * spark.sql.files.maxPartitionBytes ({@code byBytes}), rounded up to a multiple of the cores, at
   * most as many as Spark's so rounded: Spark's count includes 4 MiB of open cost a file, which
   * the rows' weights already hold (109 files of 30 MiB in all were 4 tasks on 2 cores: the second
   * wave of tasks left one core idle for the end of the other's, 0.05-0.1 s of a 0.7 s scan, and
   * two dealt tasks end together). Dealt two ways:
   * the heaviest split first to the lightest task; or to the lightest core, each core's splits
   * then cut into consecutive tasks of about equal weight, taken core by core. Each way's time is
   * Spark's scheduling played out (the next task to the first free core); the quickest is taken
   * when it beats Spark's own by more than {@link #TOLERANCE}.
   */
  static List<int[]> plan(long[] w, List<int[]> sparks, int cores, int byBytes) {
    int n = sparks.size() <= cores ? sparks.size() : (sparks.size() + cores - 1) / cores * cores;
    n = Math.min(n, Math.max(cores, (Math.max(byBytes, 1) + cores - 1) / cores * cores));
    n = Math.min(n, w.length);
    List<int[]> best = null;
    long bestTime = Long.MAX_VALUE;
    List<List<int[]>> ways = new ArrayList<>();
    ways.add(lightestFirst(w, n));
    if (n > cores) {
      ways.add(byCore(w, cores, n / cores));
    }
    for (List<int[]> way : ways) {
      long t = played(way, w, cores);
      if (t < bestTime) {
        best = way;
        bestTime = t;
      }
    }
    return played(sparks, w, cores) > TOLERANCE * bestTime ? best : null;
  }

  /** {@code bins} tasks, each split (the heaviest first) to the task lightest so far; the heaviest task first. */
  static List<int[]> lightestFirst(long[] w, int bins) {
    List<List<Integer>> tasks = new ArrayList<>();
    long[] loads = new long[bins];
    PriorityQueue<Integer> open = new PriorityQueue<>((a, b) -> loads[a] != loads[b]
        ? Long.compare(loads[a], loads[b]) : Integer.compare(a, b));
    for (int t = 0; t < bins; t++) {
      tasks.add(new ArrayList<>());
      open.add(t);
    }
    for (int i : byWeight(w)) {
      int t = open.poll();
      tasks.get(t).add(i);
      loads[t] += w[i];
      open.add(t);
    }
    Integer[] order = new Integer[bins];
    for (int t = 0; t < bins; t++) {
      order[t] = t;
    }
    Arrays.sort(order, (a, b) -> Long.compare(loads[b], loads[a]));
    List<int[]> out = new ArrayList<>();
    for (int t : order) {
      if (!tasks.get(t).isEmpty()) {
        out.add(tasks.get(t).stream().mapToInt(Integer::intValue).toArray());
      }
    }
    return out;
  }

  /** The splits dealt to {@code cores} bins, each cut into {@code k} consecutive tasks of about equal weight, interleaved. */
  static List<int[]> byCore(long[] w, int cores, int k) {
    List<int[]> bins = lightestFirst(w, cores);
    List<List<int[]>> cut = new ArrayList<>();
    for (int[] bin : bins) {
      long total = 0;
      for (int i : bin) {
        total += w[i];
      }
      List<int[]> pieces = new ArrayList<>();
      List<Integer> piece = new ArrayList<>();
      long sum = 0;
      for (int i : bin) {
        piece.add(i);
        sum += w[i];
        if (pieces.size() < k - 1 && sum * k >= total * (pieces.size() + 1)) {
          pieces.add(piece.stream().mapToInt(Integer::intValue).toArray());
          piece = new ArrayList<>();
        }
      }
      if (!piece.isEmpty()) {
        pieces.add(piece.stream().mapToInt(Integer::intValue).toArray());
      }
      cut.add(pieces);
    }
    List<int[]> out = new ArrayList<>();
    for (int j = 0; j < k; j++) {
      for (List<int[]> pieces : cut) {
        if (j < pieces.size()) {
          out.add(pieces.get(j));
        }
      }
    }
    return out;
  }

  /** When the last of {@code tasks} ends, each taken in order by the first free of {@code cores}. */
  static long played(List<int[]> tasks, long[] w, int cores) {
    PriorityQueue<Long> free = new PriorityQueue<>();
    for (int c = 0; c < cores; c++) {
      free.add(0L);
    }
    long end = 0;
    for (int[] task : tasks) {
      long t = free.poll();
      for (int i : task) {
        t += w[i];
      }
      end = Math.max(end, t);
      free.add(t);
    }
    return end;
  }

  private static Integer[] byWeight(long[] weights) {
    Integer[] order = new Integer[weights.length];
    for (int i = 0; i < order.length; i++) {
      order[i] = i;
    }
    Arrays.sort(order, (a, b) -> Long.compare(weights[b], weights[a]));
    return order;
  }

  /**
   * {@code public class io.lakerules.LakeScanExecNode extends FileSourceScanExec}: the constructor
   * of FileSourceScanExec's public one, and {@code inputRDD()} = {@link #balance}(this,
   * super.inputRDD()), kept in a field (Spark's lazy val is computed once; so is this).
   */
  static final class Generated {
    static final String NAME = "io/lakerules/LakeScanExecNode";
    static final Constructor<?> CONSTRUCTOR = make();

    private static Constructor<?> make() {
      try {
        Constructor<?>[] publics = FileSourceScanExec.class.getConstructors();
        if (publics.length != 1) {
          return null;
        }
        String superName = Type.getInternalName(FileSourceScanExec.class);
        String rdd = Type.getDescriptor(RDD.class);
        String init = Type.getConstructorDescriptor(publics[0]);
        ClassWriter cw = new ClassWriter(ClassWriter.COMPUTE_FRAMES | ClassWriter.COMPUTE_MAXS) {
          @Override
          protected String getCommonSuperClass(String a, String b) {
            return "java/lang/Object";
          }
        };
        cw.visit(Opcodes.V17, Opcodes.ACC_PUBLIC | Opcodes.ACC_SUPER, NAME, null, superName, null);
        cw.visitField(Opcodes.ACC_PRIVATE | Opcodes.ACC_TRANSIENT, "lakeDealt", rdd, null, null).visitEnd();
        MethodVisitor m = cw.visitMethod(Opcodes.ACC_PUBLIC, "<init>", init, null, null);
        m.visitCode();
        m.visitVarInsn(Opcodes.ALOAD, 0);
        int slot = 1;
        for (Type t : Type.getArgumentTypes(init)) {
          m.visitVarInsn(t.getOpcode(Opcodes.ILOAD), slot);
          slot += t.getSize();
        }
        m.visitMethodInsn(Opcodes.INVOKESPECIAL, superName, "<init>", init, false);
        m.visitInsn(Opcodes.RETURN);
        m.visitMaxs(0, 0);
        m.visitEnd();
        m = cw.visitMethod(Opcodes.ACC_PUBLIC | Opcodes.ACC_SYNCHRONIZED, "inputRDD", "()" + rdd, null, null);
        m.visitCode();
        Label done = new Label();
        m.visitVarInsn(Opcodes.ALOAD, 0);
        m.visitFieldInsn(Opcodes.GETFIELD, NAME, "lakeDealt", rdd);
        m.visitJumpInsn(Opcodes.IFNONNULL, done);
        m.visitVarInsn(Opcodes.ALOAD, 0);
        m.visitVarInsn(Opcodes.ALOAD, 0);
        m.visitVarInsn(Opcodes.ALOAD, 0);
        m.visitMethodInsn(Opcodes.INVOKESPECIAL, superName, "inputRDD", "()" + rdd, false);
        m.visitMethodInsn(Opcodes.INVOKESTATIC, Type.getInternalName(LakeScanExec.class), "balance",
            "(" + Type.getDescriptor(FileSourceScanExec.class) + rdd + ")" + rdd, false);
        m.visitFieldInsn(Opcodes.PUTFIELD, NAME, "lakeDealt", rdd);
        m.visitLabel(done);
        m.visitVarInsn(Opcodes.ALOAD, 0);
        m.visitFieldInsn(Opcodes.GETFIELD, NAME, "lakeDealt", rdd);
        m.visitInsn(Opcodes.ARETURN);
        m.visitMaxs(0, 0);
        m.visitEnd();
        cw.visitEnd();
        Class<?> made = MethodHandles.lookup().defineClass(cw.toByteArray());
        return made.getConstructors()[0];
      } catch (Throwable e) {
        org.slf4j.LoggerFactory.getLogger(LakeScanExec.class).warn(
            "lakerules: lake scans keep Spark's read tasks (their node could not be made: " + e + ")");
        return null;
      }
    }
  }

  /**
   * Plans a lake table's scan (projections and filters over a LakeFileIndex relation) as Spark's
   * FileSourceStrategy does, its scan node a LakeScanExec; anything else is left to Spark.
   */
  static final class Strategy extends SparkStrategy {
    @Override
    public Seq<SparkPlan> apply(LogicalPlan plan) {
      LogicalPlan leaf = plan;
      while (leaf instanceof Project || leaf instanceof Filter) {
        leaf = leaf.children().head();
      }
      if (!(leaf instanceof LogicalRelation)
          || !(((LogicalRelation) leaf).relation() instanceof HadoopFsRelation)
          || !(((HadoopFsRelation) ((LogicalRelation) leaf).relation()).location() instanceof LakeFileIndex)) {
        return CollectionConverters.asScala(List.<SparkPlan>of()).toList();
      }
      List<SparkPlan> out = new ArrayList<>();
      for (SparkPlan p : CollectionConverters.asJava(FileSourceStrategy$.MODULE$.apply(plan))) {
        out.add(swap(p));
      }
      return CollectionConverters.asScala(out).toList();
    }

    private static SparkPlan swap(SparkPlan p) {
      if (p instanceof FileSourceScanExec && !isBalanced(p)) {
        return of((FileSourceScanExec) p);
      }
      List<SparkPlan> kids = new ArrayList<>();
      boolean changed = false;
      for (SparkPlan c : CollectionConverters.asJava(p.children())) {
        SparkPlan s = swap(c);
        changed |= s != c;
        kids.add(s);
      }
      // not withNewChildren: the new scan equals Spark's (a case class of the same fields), so it
      // would keep the old children
      return changed ? (SparkPlan) p.withNewChildrenInternal(CollectionConverters.asScala(kids).toIndexedSeq()) : p;
    }
  }
}
