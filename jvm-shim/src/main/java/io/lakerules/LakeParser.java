package io.lakerules;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

/**
 * A dynamic proxy around Spark's parser. A proxy, not a subclass, so that new or changed
 * ParserInterface methods in later Spark versions pass through untouched.
 */
final class LakeParser implements InvocationHandler {
  private final SparkSession session;
  private final ParserInterface delegate;

  private LakeParser(SparkSession session, ParserInterface delegate) {
    this.session = session;
    this.delegate = delegate;
  }

  static ParserInterface wrap(SparkSession session, ParserInterface delegate) {
    return (ParserInterface) Proxy.newProxyInstance(
        LakeParser.class.getClassLoader(), new Class<?>[] {ParserInterface.class},
        new LakeParser(session, delegate));
  }

  @Override
  public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
    String name = method.getName();
    if ((name.equals("parsePlan") || name.equals("parsePlanWithParameters"))
        && args != null && args.length >= 1 && args[0] instanceof String) {
      String sql = (String) args[0];
      try {
        if (!Bridge.attached() && Bridge.routedBeforeAttach(sql)) {
          return parseBeforeAttach(method, args, sql);
        }
        if (Bridge.routed(sql)) {
          Object plan = Bridge.unwrap(Bridge.backend(session).parse(session, sql));
          if (plan instanceof LogicalPlan) {
            return plan;
          }
        }
      } catch (Throwable t) {
        throw declared(method, t);
      }
    }
    if (name.equals("toString") && (args == null || args.length == 0)) {
      return "LakeParser(" + delegate + ")";
    }
    return delegate(method, args);
  }

  /**
   * What a proxy may throw: a parser method declares only ParseException, and a proxy turns any
   * other checked exception (an AnalysisException from the registry, or the error that it could
   * not be started) into an UndeclaredThrowableException without a message. Such an error is
   * rethrown unchecked, with its message.
   */
  private static Throwable declared(Method method, Throwable t) {
    if (t instanceof RuntimeException || t instanceof Error) {
      return t;
    }
    for (Class<?> c : method.getExceptionTypes()) {
      if (c.isInstance(t)) {
        return t;
      }
    }
    return new IllegalArgumentException(t.getMessage(), t);
  }

  private Object delegate(Method method, Object[] args) throws Throwable {
    try {
      return method.invoke(delegate, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }

  /**
   * A statement the registry may route, with no registry attached yet (a JVM driver's first lake
   * statement). The registry is started if the statement is about a lake catalog: Spark parses
   * it and the plan names one, or Spark cannot parse it (a statement only lakerules knows) and
   * its text names one; or the current catalog is one. Otherwise the statement is Spark's alone,
   * and no process is started.
   */
  private Object parseBeforeAttach(Method method, Object[] args, String sql) throws Throwable {
    Object sparkPlan = null;
    Throwable sparkError = null;
    try {
      sparkPlan = delegate(method, args);
    } catch (Throwable t) {
      sparkError = t;
    }
    if (!aboutLake(sparkPlan, sparkError == null ? null : sql)) {
      if (sparkError != null) {
        throw sparkError;
      }
      return sparkPlan;
    }
    LakeBackend backend = Bridge.backend(session); // started now, or an error that says why not
    if (Bridge.routed(sql)) {
      Object plan = Bridge.unwrap(backend.parse(session, sql));
      if (plan instanceof LogicalPlan) {
        return plan;
      }
    }
    if (sparkError != null) {
      throw sparkError;
    }
    return sparkPlan;
  }

  private boolean aboutLake(Object plan, String unparsedText) {
    Set<String> lake = new HashSet<>();
    String prefix = "spark.sql.catalog.";
    for (Map.Entry<String, String> e
        : scala.jdk.javaapi.CollectionConverters.asJava(session.conf().getAll()).entrySet()) {
      String key = e.getKey();
      if (key.startsWith(prefix) && key.indexOf('.', prefix.length()) < 0
          && LakeCatalog.class.getName().equals(e.getValue())) {
        lake.add(key.substring(prefix.length()).toLowerCase(Locale.ROOT));
      }
    }
    if (lake.isEmpty()) {
      return false;
    }
    if (lake.contains(session.catalog().currentCatalog().toLowerCase(Locale.ROOT))) {
      return true;
    }
    if (unparsedText != null) {
      for (String name : lake) {
        Pattern qualified = Pattern.compile("(?:^|[^\\w.`])`?" + Pattern.quote(name) + "`?\\s*\\.",
            Pattern.CASE_INSENSITIVE);
        if (qualified.matcher(unparsedText).find()) {
          return true;
        }
      }
      return false;
    }
    return mentions(plan, lake, new IdentityHashMap<>(), 0);
  }

  /** A multi-part name (a Seq of strings) anywhere in the plan whose first part is a lake catalog. */
  private static boolean mentions(Object node, Set<String> lake, IdentityHashMap<Object, Boolean> seen,
      int depth) {
    if (node == null || depth > 500 || seen.put(node, Boolean.TRUE) != null) {
      return false;
    }
    if (node instanceof scala.collection.Seq) {
      scala.collection.Seq<?> seq = (scala.collection.Seq<?>) node;
      if (seq.size() >= 2 && seq.head() instanceof String
          && lake.contains(((String) seq.head()).toLowerCase(Locale.ROOT))) {
        return true;
      }
    }
    scala.collection.Iterator<?> parts;
    if (node instanceof scala.collection.Iterable) {
      parts = ((scala.collection.Iterable<?>) node).iterator();
    } else if (node instanceof scala.Product) {
      parts = ((scala.Product) node).productIterator();
    } else {
      return false;
    }
    while (parts.hasNext()) {
      if (mentions(parts.next(), lake, seen, depth + 1)) {
        return true;
      }
    }
    return false;
  }
}
