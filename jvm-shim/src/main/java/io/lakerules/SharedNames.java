package io.lakerules;

import java.io.IOException;
import java.io.InputStream;
import java.util.Map;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The names the shim and the Python package both spell, defined once in
 * python/lakerules/spark/shared.py: jvm-shim/shim_build.py writes them into the jar
 * (io/lakerules/shared.json), read here when the class loads. A jar built without them (javac
 * alone, not shim_build.py) fails at its first use with an error that says so.
 */
final class SharedNames {
  private static final Map<String, String> NAMES = load();

  static final String JVM_DRIVER_MODULE = get("JVM_DRIVER_MODULE");
  static final String PYTHON_SETTING = get("PYTHON_SETTING");
  static final String PYTHON_START_TIMEOUT_SETTING = get("PYTHON_START_TIMEOUT_SETTING");
  static final String NESTED_IDS_OPTION = get("NESTED_IDS_OPTION");
  static final String ROW_GROUPS_OPTION = get("ROW_GROUPS_OPTION");
  static final String FIRST_ROW_ID_FIELD = get("FIRST_ROW_ID_FIELD");
  static final String DATA_SEQUENCE_FIELD = get("DATA_SEQUENCE_FIELD");

  private SharedNames() {}

  private static Map<String, String> load() {
    try (InputStream in = SharedNames.class.getResourceAsStream("shared.json")) {
      if (in == null) {
        throw new IllegalStateException("lakerules: the shim jar has no io/lakerules/shared.json: "
            + "build it with jvm-shim/shim_build.py (make shim), which writes lakerules/spark/shared.py into it");
      }
      return new ObjectMapper().readValue(in, new TypeReference<Map<String, String>>() {});
    } catch (IOException e) {
      throw new IllegalStateException("lakerules: cannot read io/lakerules/shared.json from the shim jar", e);
    }
  }

  private static String get(String key) {
    String value = NAMES.get(key);
    if (value == null) {
      throw new IllegalStateException("lakerules: the shim jar's shared.json has no " + key
          + ": it was built from another lakerules/spark/shared.py; rebuild it (make shim)");
    }
    return value;
  }
}
