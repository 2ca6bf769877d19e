package io.lakerules;

/** A position in a lake table's stream of appended files, as Python planned it (its JSON). */
public final class LakeOffset extends org.apache.spark.sql.execution.streaming.Offset {
  private final String json;

  public LakeOffset(String json) {
    this.json = json;
  }

  @Override
  public String json() {
    return json;
  }
}
