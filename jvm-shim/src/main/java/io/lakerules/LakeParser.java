package io.lakerules;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;

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
        && args != null && args.length >= 1 && args[0] instanceof String
        && Bridge.routed((String) args[0])) {
      Object plan = Bridge.unwrap(Bridge.backend().parse(session, (String) args[0]));
      if (plan instanceof LogicalPlan) {
        return plan;
      }
    }
    if (name.equals("toString") && (args == null || args.length == 0)) {
      return "LakeParser(" + delegate + ")";
    }
    try {
      return method.invoke(delegate, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }
}
