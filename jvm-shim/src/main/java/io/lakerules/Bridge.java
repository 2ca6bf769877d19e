package io.lakerules;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.catalyst.analysis.ResolvedIdentifier;
import org.apache.spark.sql.catalyst.analysis.ResolvedTable;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;

/**
 * The one place where the JVM finds the Python registry: attach and detach, the statements its
 * parser routes, the options Spark gave each lake catalog, the cheap touchesLake pre-check before
 * a call into Python, and the errors that cross the edge (what Python returned as a failure, the
 * AnalysisException and ParseException it asks for). The Catalyst objects Python builds in one
 * call are PlanBuilders'.
 */
public final class Bridge {
  private static volatile LakeBackend backend;
  private static volatile Pattern routes;
  private static volatile boolean detached;
  /**
   * statements.ROUTES as the jar was built with it (jvm-shim/build.sh writes it): what the
   * parser may route before any registry is attached, so that the first statement of a JVM
   * driver can start one.
   */
  private static final Pattern BUILT_ROUTES = builtRoutes();
  private static final Map<String, Map<String, String>> catalogOptions = new ConcurrentHashMap<>();

  private Bridge() {}

  /** Called by lakerules.attach(): the Python registry and the statements its parser takes. */
  public static synchronized void register(LakeBackend b, String routePattern) {
    routes = routePattern == null || routePattern.isEmpty()
        ? null : Pattern.compile(routePattern, Pattern.CASE_INSENSITIVE | Pattern.DOTALL);
    backend = b;
    detached = false;
  }

  /** Called by lakerules.detach(): lake statements fail until attach() is called again. */
  public static synchronized void unregister() {
    backend = null;
    routes = null;
    detached = true;
  }

  public static boolean attached() {
    return backend != null;
  }

  static LakeBackend current() {
    return backend;
  }

  /** Replace expected by replacement, if expected is still the registry. */
  static synchronized void replace(LakeBackend expected, LakeBackend replacement) {
    if (backend == expected) {
      backend = replacement;
    }
  }

  /** Forget b (a registry whose process ended), if it is still the registry. */
  static synchronized void unregisterIf(LakeBackend b) {
    if (backend == b) {
      backend = null;
      routes = null;
    }
  }

  /**
   * The registry for a statement of session (null: the active session). With none attached, a
   * JVM driver starts one in a Python process (PythonBackend), unless lakerules.detach() said not to.
   */
  static LakeBackend backend(org.apache.spark.sql.SparkSession session) {
    LakeBackend b = backend;
    if (b != null && !PythonBackend.stale(b)) {
      return b;
    }
    if (detached) {
      throw sneakyThrow(analysisError(
          "lakerules: this statement uses a lake table, but the lakerules rule registry was "
              + "detached from this JVM (lakerules.detach). Call lakerules.attach(spark) to attach "
              + "it again."));
    }
    return PythonBackend.ensure(session);
  }

  static boolean routed(String sql) {
    Pattern p = routes;
    return p != null && sql != null && p.matcher(sql).lookingAt();
  }

  /** Whether, with no registry attached yet, sql may be a statement the registry routes. */
  static boolean routedBeforeAttach(String sql) {
    return BUILT_ROUTES != null && sql != null && BUILT_ROUTES.matcher(sql).lookingAt();
  }

  private static Pattern builtRoutes() {
    try (java.io.InputStream in = Bridge.class.getResourceAsStream("routes.regex")) {
      if (in == null) {
        return null;
      }
      String p = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).strip();
      return p.isEmpty() ? null : Pattern.compile(p, Pattern.CASE_INSENSITIVE | Pattern.DOTALL);
    } catch (java.io.IOException e) {
      throw new IllegalStateException("lakerules: cannot read routes.regex from the shim jar", e);
    }
  }

  static void putCatalogOptions(String name, Map<String, String> options) {
    catalogOptions.put(name, options);
  }

  /** The options Spark gave a lake catalog (spark.sql.catalog.NAME.*), read by Python as JSON. */
  public static String catalogOptions(String name) {
    Map<String, String> o = catalogOptions.get(name);
    try {
      return o == null ? null : LakeCatalog.JSON.writeValueAsString(o);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * The session's settings whose names start with prefix, as JSON: one Py4J call (pyspark's
   * conf.getAll crosses one call per setting and ends its iteration with an exception).
   */
  public static String settingsWithPrefix(org.apache.spark.sql.SparkSession session, String prefix) {
    Map<String, String> out = new java.util.TreeMap<>();
    scala.jdk.javaapi.CollectionConverters.asJava(session.conf().getAll()).forEach((k, v) -> {
      if (k.startsWith(prefix)) {
        out.put(k, v);
      }
    });
    try {
      return LakeCatalog.JSON.writeValueAsString(out);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  /** Cheap pre-check before calling Python: does the plan touch a lake table or catalog anywhere? */
  public static boolean touchesLake(LogicalPlan plan) {
    if (plan instanceof DataSourceV2Relation
        && ((DataSourceV2Relation) plan).table() instanceof LakeTable) {
      return true;
    }
    if (plan instanceof ResolvedIdentifier
        && ((ResolvedIdentifier) plan).catalog() instanceof LakeCatalog) {
      return true;
    }
    // a command's table (TRUNCATE TABLE, DESCRIBE TABLE ... col, ALTER TABLE ...)
    if (plan instanceof ResolvedTable && ((ResolvedTable) plan).table() instanceof LakeTable) {
      return true;
    }
    if (plan instanceof LakeStatement) {  // a statement lakerules parsed, its table resolved or not
      return true;
    }
    // Walk every field, not only children: a write command keeps its target table outside children.
    scala.collection.Iterator<Object> it = plan.productIterator();
    while (it.hasNext()) {
      Object field = it.next();
      if (field instanceof LogicalPlan) {
        if (touchesLake((LogicalPlan) field)) return true;
      } else if (field instanceof scala.collection.Iterable) {
        scala.collection.Iterator<?> items = ((scala.collection.Iterable<?>) field).iterator();
        while (items.hasNext()) {
          Object item = items.next();
          if (item instanceof LogicalPlan && touchesLake((LogicalPlan) item)) return true;
        }
      }
    }
    return false;
  }

  /** Rethrow what Python returned as a failure, unchanged; return anything else. */
  static Object unwrap(Object result) {
    if (result instanceof Throwable) {
      throw sneakyThrow((Throwable) result);
    }
    return result;
  }

  /**
   * An AnalysisException carrying a plain message, built without an error-class lookup, and
   * without a stack trace (LakeAnalysisException).
   */
  public static AnalysisException analysisError(String message) {
    return new LakeAnalysisException(message);
  }

  private static <T extends Throwable> T withoutStack(T t) {
    t.setStackTrace(new StackTraceElement[0]);
    return t;
  }

  /**
   * Spark's own syntax error (PARSE_SYNTAX_ERROR, with the statement and a caret under the
   * position) for a statement the Python parser rejects. The parser may throw no other checked
   * exception: ParserInterface declares only ParseException, and the proxy would wrap it.
   * near is the offending text, or empty at the end of the statement; position is 0-based.
   */
  public static org.apache.spark.sql.catalyst.parser.ParseException parseError(
      String sql, int line, int position, String near, String hint) {
    scala.Option<Object> none = scala.Option.empty();
    org.apache.spark.sql.catalyst.trees.Origin origin = new org.apache.spark.sql.catalyst.trees.Origin(
        scala.Option.apply((Object) line), scala.Option.apply((Object) position), none, none,
        scala.Option.empty(), scala.Option.empty(), scala.Option.empty(), scala.Option.empty(),
        scala.Option.empty(), scala.Option.empty());
    java.util.Map<String, String> javaParams = new java.util.LinkedHashMap<>();
    javaParams.put("error", near.isEmpty() ? "end of input" : "'" + near + "'");
    javaParams.put("hint", hint);
    scala.collection.immutable.Map<String, String> params = scala.collection.immutable.Map$.MODULE$
        .from(scala.jdk.javaapi.CollectionConverters.asScala(javaParams));
    return withoutStack(new org.apache.spark.sql.catalyst.parser.ParseException(
        scala.Option.apply(sql), origin, "PARSE_SYNTAX_ERROR", params));
  }

  /**
   * Spark's own FAILED_TO_PARSE_TOO_COMPLEX for a statement the Python parser finds nested too
   * deep, as Spark's parser reports its own statements that overflow its stack.
   */
  public static org.apache.spark.sql.catalyst.parser.ParseException parseTooComplex(String sql) {
    scala.Option<Object> none = scala.Option.empty();
    org.apache.spark.sql.catalyst.trees.Origin origin = new org.apache.spark.sql.catalyst.trees.Origin(
        scala.Option.apply((Object) 1), scala.Option.apply((Object) 0), none, none,
        scala.Option.empty(), scala.Option.empty(), scala.Option.empty(), scala.Option.empty(),
        scala.Option.empty(), scala.Option.empty());
    return withoutStack(new org.apache.spark.sql.catalyst.parser.ParseException(
        scala.Option.apply(sql), origin, "FAILED_TO_PARSE_TOO_COMPLEX",
        scala.collection.immutable.Map$.MODULE$.<String, String>empty()));
  }

  @SuppressWarnings("unchecked")
  static <T extends Throwable> RuntimeException sneakyThrow(Throwable t) throws T {
    throw (T) t;
  }
}
