package io.lakerules;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

/**
 * Spark's case classes grow parameters between releases (CatalogStorageFormat gained one in 4.2),
 * so a Java call of their apply compiles against one version only. This builds one through its
 * companion's widest apply: the leading arguments given, every later one its declared default
 * (None for an Option without one). The shim then compiles and runs on every supported pyspark.
 */
final class CaseClasses {
  private CaseClasses() {}

  @SuppressWarnings("unchecked")
  static <T> T build(Object companion, Object... leading) {
    Class<?> c = companion.getClass();
    Method apply = null;
    for (Method m : c.getMethods()) {
      if (m.getName().equals("apply") && m.getParameterCount() >= leading.length
          && (apply == null || m.getParameterCount() > apply.getParameterCount())) {
        apply = m;
      }
    }
    if (apply == null) {
      throw new IllegalStateException("lakerules: " + c.getName() + " has no apply of "
          + leading.length + " or more parameters");
    }
    Object[] args = new Object[apply.getParameterCount()];
    try {
      for (int i = 0; i < args.length; i++) {
        args[i] = i < leading.length ? leading[i] : fallback(companion, apply, i);
      }
      return (T) apply.invoke(companion, args);
    } catch (InvocationTargetException e) {
      throw Bridge.sneakyThrow(e.getCause());
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("lakerules: cannot build " + c.getName() + ": " + e, e);
    }
  }

  private static Object fallback(Object companion, Method apply, int i) throws ReflectiveOperationException {
    try {
      return companion.getClass().getMethod("apply$default$" + (i + 1)).invoke(companion);
    } catch (NoSuchMethodException e) {
      if (apply.getParameterTypes()[i] == scala.Option.class) return scala.Option.empty();
      throw new IllegalStateException("lakerules: parameter " + (i + 1) + " of "
          + companion.getClass().getName() + ".apply has no default", e);
    }
  }
}
