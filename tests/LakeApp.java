import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * A Java application of tests/test_jvm_drivers.py: no Python of its own. Arguments: Spark
 * settings key=value, then --, then statements, each run with spark.sql and reported on stdout as
 * "ROW i<TAB>values..." lines and then "OK i", or "ERROR i<TAB>message". Two steps are not SQL:
 * "!pid" prints the pid of the Python registry process the shim started, and
 * "!kill-during SQL" runs SQL while killing that process as soon as a Spark job of it runs.
 */
public final class LakeApp {
  public static void main(String[] args) throws Exception {
    SparkSession.Builder builder = SparkSession.builder().appName("lakerules-jvm-app");
    int i = 0;
    for (; i < args.length && !args[i].equals("--"); i++) {
      int eq = args[i].indexOf('=');
      builder = builder.config(args[i].substring(0, eq), args[i].substring(eq + 1));
    }
    SparkSession spark = builder.getOrCreate();
    spark.sparkContext().setLogLevel("ERROR");
    int n = 0;
    for (i++; i < args.length; i++, n++) {
      String sql = args[i];
      try {
        if (sql.equals("!pid")) {
          System.out.println("PID " + n + "\t" + io.lakerules.PythonBackend.pid());
          continue;
        }
        Thread killer = null;
        if (sql.startsWith("!kill-during ")) {
          sql = sql.substring("!kill-during ".length());
          long pid = io.lakerules.PythonBackend.pid();
          killer = new Thread(() -> {
            while (spark.sparkContext().statusTracker().getActiveJobIds().length == 0) {
              try {
                Thread.sleep(10);
              } catch (InterruptedException e) {
                return;
              }
            }
            ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
          });
          killer.setDaemon(true);
          killer.start();
        }
        List<Row> rows = spark.sql(sql).collectAsList();
        for (Row r : rows) {
          List<String> values = new ArrayList<>();
          for (int c = 0; c < r.length(); c++) {
            values.add(String.valueOf(r.get(c)));
          }
          System.out.println("ROW " + n + "\t" + String.join("\t", values).replace("\n", "\\n"));
        }
        System.out.println("OK " + n);
      } catch (Exception e) {
        System.out.println("ERROR " + n + "\t" + (e.getClass().getName() + ": " + e.getMessage()).replace("\n", "\\n"));
        if (e.getMessage() == null) e.printStackTrace();
      }
      System.out.flush();
    }
    spark.stop();
  }
}
