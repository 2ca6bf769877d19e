package io.lakerules;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * The Python rule registry of a JVM driver that has none attached in-process: spark-sql, the
 * Thrift server, Java and Scala applications, a Python application that never imported
 * lakerules. The first statement that needs the registry starts {@code python -m
 * lakerules.jvm_driver}, which connects back to this JVM the way spark-submit connects a Python
 * driver to its JVM (a Py4J server with a secret, its port and secret in PYSPARK_GATEWAY_PORT
 * and PYSPARK_GATEWAY_SECRET), wraps the running SparkSession and calls lakerules.attach. That
 * one process then serves every statement of this JVM until the JVM exits.
 *
 * <p>Settings: spark.lakerules.python (the interpreter; else env PYSPARK_PYTHON; else python3)
 * and spark.lakerules.python.startTimeout (how long to wait for it to attach; default 120s).
 *
 * <p>Spark's Py4J server class is private to Spark and changes between releases, so it is
 * reached by reflection, never compiled against.
 */
public final class PythonBackend {
  // spelled once, in python/lakerules/spark/shared.py (SharedNames)
  public static final String PYTHON_CONF = SharedNames.PYTHON_SETTING;
  public static final String TIMEOUT_CONF = SharedNames.PYTHON_START_TIMEOUT_SETTING;
  static final String MODULE = SharedNames.JVM_DRIVER_MODULE;
  private static final long DEFAULT_TIMEOUT_MS = 120_000;
  private static final int TAIL_LINES = 40;

  /** Held while a process is started or stopped: one start at a time per JVM. */
  private static final Object lock = new Object();
  private static volatile Launched current;
  private static boolean hookInstalled;

  private PythonBackend() {}

  // ---- called by Python (lakerules.jvm_driver) while it starts ---------------------------------

  /** The JVM SparkSession the starting Python process wraps (never blocks: the starter holds the lock). */
  public static Object session() {
    Launched l = current;
    return l == null ? null : l.session;
  }

  // ---- observed by tests and tools --------------------------------------------------------------

  /** The pid of the running Python registry process started by this JVM, or -1. */
  public static long pid() {
    Launched l = current;
    return l != null && l.process.isAlive() ? l.process.pid() : -1;
  }

  // ---- called by the shim -----------------------------------------------------------------------

  /** Whether b is a registry this class started whose process died or whose SparkContext stopped. */
  static boolean stale(LakeBackend b) {
    return b instanceof Guard && ((Guard) b).owner.stale();
  }

  /**
   * The registry for session (null: the active or default session): the one attached, else a
   * Python process started now and waited for. Throws an AnalysisException that says what was
   * tried and how to fix it.
   */
  static LakeBackend ensure(SparkSession session) {
    synchronized (lock) {
      LakeBackend b = Bridge.current();
      if (b != null && !stale(b)) {
        return b;
      }
      if (current != null) {
        current.stop();
        current = null;
      }
      SparkSession s = session != null ? session : activeSession();
      Launched l = new Launched(s);
      current = l;
      try {
        installShutdownHook();
        return l.start();
      } catch (Throwable e) { // AnalysisException included, thrown unchecked
        l.stop();
        current = null;
        throw Bridge.sneakyThrow(e);
      }
    }
  }

  private static SparkSession activeSession() {
    scala.Option<SparkSession> s = SparkSession.getActiveSession();
    if (s.isEmpty()) {
      s = SparkSession.getDefaultSession();
    }
    if (s.isEmpty()) {
      throw fail("lakerules: a lake catalog was called with no active SparkSession in this JVM, "
          + "so there is no session to start the Python rule registry for");
    }
    return s.get();
  }

  private static void installShutdownHook() {
    if (!hookInstalled) {
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        Launched l = current;
        if (l != null) {
          l.stop();
        }
      }, "lakerules-python-shutdown"));
      hookInstalled = true;
    }
  }

  /**
   * The error for a call into the Python registry that failed: when the process this class
   * started has died, one that says so; else e itself. (Calls through a registry go through a
   * {@link Guard}; a planned command's action is called directly, by {@link LakeCommand}.)
   */
  static RuntimeException orDied(RuntimeException e) {
    Launched l = current;
    RuntimeException died = l == null ? null : l.died(e);
    return died != null ? died : e;
  }

  static RuntimeException fail(String message) {
    return Bridge.sneakyThrow(Bridge.analysisError(message));
  }

  /** One Python process and the Py4J server it is connected to. */
  private static final class Launched {
    final SparkSession session;
    final SparkContext context;
    final String python;
    final long timeoutMs;
    private final ArrayDeque<String> tail = new ArrayDeque<>();
    private Object server;
    Process process;
    private Thread pump;
    private volatile Guard guard;

    Launched(SparkSession session) {
      this.session = session;
      this.context = session.sparkContext();
      this.python = interpreter(session);
      this.timeoutMs = timeout(session);
    }

    LakeBackend start() {
      server = startServer(context.getConf());
      int port = (Integer) call(server, "getListeningPort");
      String secret = (String) call(server, "secret");

      ProcessBuilder pb = new ProcessBuilder(python, "-m", MODULE);
      Map<String, String> env = pb.environment();
      env.put("PYSPARK_GATEWAY_PORT", Integer.toString(port));
      env.put("PYSPARK_GATEWAY_SECRET", secret);
      env.put("PYTHONUNBUFFERED", "YES");
      // This process is a classic PySpark driver of this JVM, whatever launched the JVM.
      env.remove("SPARK_CONNECT_MODE_ENABLED");
      env.remove("SPARK_REMOTE");
      env.remove("_PYSPARK_DRIVER_CONN_INFO_PATH");
      pb.redirectErrorStream(true);
      try {
        process = pb.start(); // stdin stays a pipe from this JVM: Python exits when it closes
      } catch (IOException e) {
        throw fail("lakerules: could not run the Python interpreter '" + python + "' to start the "
            + "lakerules rule registry (" + e.getMessage() + "). " + howToSet());
      }
      pump = new Thread(this::forwardOutput, "lakerules-python-output");
      pump.setDaemon(true);
      pump.start();

      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
      while (true) {
        LakeBackend b = Bridge.current();
        if (b != null) {
          Guard g = new Guard(b, this);
          Bridge.replace(b, g);
          guard = g;
          process.onExit().thenRun(() -> Bridge.unregisterIf(g));
          return g;
        }
        if (!process.isAlive()) {
          throw fail("lakerules: the Python rule registry did not start: '" + python + " -m "
              + MODULE + "' exited with code " + exitCode() + "." + output() + " " + howToSet());
        }
        if (System.nanoTime() > deadline) {
          throw fail("lakerules: the Python rule registry ('" + python + " -m " + MODULE
              + "', pid " + process.pid() + ") did not attach within " + timeoutMs / 1000
              + "s; it was stopped." + output() + " Raise " + TIMEOUT_CONF
              + " if the machine is slow, or " + howToSet());
        }
        try {
          Thread.sleep(20);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw fail("lakerules: interrupted while waiting for the Python rule registry to start");
        }
      }
    }

    boolean stale() {
      return !process.isAlive() || context.isStopped();
    }

    /** Close Python's stdin (it exits on its own), then make sure; shut the Py4J server down. */
    void stop() {
      Guard g = guard;
      if (g != null) {
        Bridge.unregisterIf(g);
      }
      if (process != null) {
        try {
          process.getOutputStream().close();
          if (!process.waitFor(3, TimeUnit.SECONDS)) {
            process.destroyForcibly();
          }
        } catch (IOException | InterruptedException e) {
          process.destroyForcibly();
        }
      }
      if (server != null) {
        try {
          call(server, "shutdown");
        } catch (RuntimeException e) {
          // shutting down: nothing left to tell
        }
      }
    }

    /** The error for a call that failed because the process is gone, or null if it is alive. */
    RuntimeException died(RuntimeException cause) {
      if (!cause.getClass().getName().startsWith("py4j.")) {
        return null;
      }
      try {
        process.waitFor(500, TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (process.isAlive()) {
        return null;
      }
      return fail("lakerules: the Python rule registry process ('" + python + " -m " + MODULE
          + "', pid " + process.pid() + ") exited with code " + exitCode()
          + " while serving this statement; the next lake statement starts a new one." + output()
          + " " + howToSet());
    }

    private String exitCode() {
      try {
        pump.join(2000); // the last lines it printed
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return process.isAlive() ? "?" : Integer.toString(process.exitValue());
    }

    private void forwardOutput() {
      try (BufferedReader in = new BufferedReader(
          new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = in.readLine()) != null) {
          System.err.println("[lakerules python] " + line);
          synchronized (tail) {
            if (tail.size() == TAIL_LINES) tail.removeFirst();
            tail.addLast(line);
          }
        }
      } catch (IOException e) {
        // the process is gone
      }
    }

    private String output() {
      List<String> lines;
      synchronized (tail) {
        lines = new ArrayList<>(tail);
      }
      return lines.isEmpty() ? " It printed nothing."
          : " Its last output:\n  " + String.join("\n  ", lines) + "\n";
    }
  }

  private static String howToSet() {
    return "The interpreter must have lakerules installed (pip install lakerules, with the same "
        + "pyspark version as this Spark); choose it with --conf " + PYTHON_CONF
        + "=/path/to/python (else the environment variable PYSPARK_PYTHON is used, else python3).";
  }

  private static String interpreter(SparkSession session) {
    String python = session.conf().getOption(PYTHON_CONF).getOrElse(() -> null);
    if (python == null) {
      python = System.getenv("PYSPARK_PYTHON");
    }
    if (python == null || python.isBlank()) {
      python = "python3";
    }
    return python.trim();
  }

  private static long timeout(SparkSession session) {
    String text = session.conf().getOption(TIMEOUT_CONF).getOrElse(() -> null);
    if (text == null) {
      return DEFAULT_TIMEOUT_MS;
    }
    String t = text.trim().toLowerCase(Locale.ROOT);
    long unit = 1000;
    if (t.endsWith("ms")) {
      unit = 1;
      t = t.substring(0, t.length() - 2);
    } else if (t.endsWith("s")) {
      t = t.substring(0, t.length() - 1);
    } else if (t.endsWith("min")) {
      unit = 60_000;
      t = t.substring(0, t.length() - 3);
    } else if (t.endsWith("m")) {
      unit = 60_000;
      t = t.substring(0, t.length() - 1);
    }
    try {
      long n = Long.parseLong(t.trim());
      if (n > 0) {
        return n * unit;
      }
    } catch (NumberFormatException e) {
      // below
    }
    throw fail("lakerules: " + TIMEOUT_CONF + "='" + text + "' is not a positive duration "
        + "(for example 120s, 2m or 90000ms)");
  }

  /**
   * Spark's Py4J server (org.apache.spark.api.python.Py4JServer, a ClientServer or a
   * GatewayServer as PYSPARK_PIN_THREAD says, on loopback with a fresh secret), started on a
   * daemon thread so that its threads are daemons too and find this jar's classes.
   */
  private static Object startServer(SparkConf conf) {
    Constructor<?> make = null;
    try {
      Class<?> cls = Class.forName("org.apache.spark.api.python.Py4JServer");
      for (Constructor<?> c : cls.getConstructors()) {
        if (c.getParameterCount() == 1 && c.getParameterTypes()[0].isInstance(conf)) {
          make = c;
        }
      }
    } catch (ClassNotFoundException e) {
      // below
    }
    if (make == null) {
      throw fail("lakerules: this Spark has no org.apache.spark.api.python.Py4JServer(SparkConf), "
          + "which lakerules needs to start its Python rule registry in a JVM driver");
    }
    // A ClientServer starts listening when it is built: build it on the daemon thread too.
    Constructor<?> constructor = make;
    Object[] server = new Object[1];
    Throwable[] failed = new Throwable[1];
    Thread init = new Thread(() -> {
      try {
        server[0] = constructor.newInstance(conf);
        call(server[0], "start");
      } catch (InvocationTargetException e) {
        failed[0] = e.getCause();
      } catch (Throwable e) {
        failed[0] = e;
      }
    }, "lakerules-py4j-init");
    init.setDaemon(true);
    init.setContextClassLoader(PythonBackend.class.getClassLoader());
    init.start();
    try {
      init.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (failed[0] != null || server[0] == null) {
      if (server[0] != null) {
        call(server[0], "shutdown");
      }
      throw fail("lakerules: could not start a Py4J server for the Python rule registry: "
          + failed[0]);
    }
    return server[0];
  }

  private static Object call(Object target, String method) {
    try {
      return target.getClass().getMethod(method).invoke(target);
    } catch (InvocationTargetException e) {
      Throwable c = e.getCause();
      throw c instanceof RuntimeException ? (RuntimeException) c : new IllegalStateException(c);
    } catch (ReflectiveOperationException e) {
      throw fail("lakerules: this Spark's org.apache.spark.api.python.Py4JServer has no " + method
          + "() (" + e + "), which lakerules needs to start its Python rule registry");
    }
  }

  /**
   * The registry a started process attached, as the shim sees it: calls pass through; a call
   * that fails because the process died fails with an error that says so.
   */
  static final class Guard implements LakeBackend {
    private final LakeBackend python;
    private final Launched owner;

    Guard(LakeBackend python, Launched owner) {
      this.python = python;
      this.owner = owner;
    }

    @Override
    public Object parse(Object session, String sqlText) {
      try {
        return python.parse(session, sqlText);
      } catch (RuntimeException e) {
        throw orDied(e);
      }
    }

    @Override
    public Object rewrite(Object session, org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan,
        String phase) {
      try {
        return python.rewrite(session, plan, phase);
      } catch (RuntimeException e) {
        throw orDied(e);
      }
    }

    @Override
    public Object stream(Object session, String op, String argsJson) {
      try {
        return python.stream(session, op, argsJson);
      } catch (RuntimeException e) {
        throw orDied(e);
      }
    }

    @Override
    public String catalog(String catalogName, String op, String argsJson) {
      try {
        return python.catalog(catalogName, op, argsJson);
      } catch (RuntimeException e) {
        throw orDied(e);
      }
    }

    private RuntimeException orDied(RuntimeException e) {
      RuntimeException died = owner.died(e);
      return died != null ? died : e;
    }
  }
}
