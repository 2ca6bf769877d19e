package io.lakerules.functions;

/**
 * The fields of an Iceberg manifest entry record that the shim's readers of encoded entries
 * (ManifestColumns, ManifestMerge) act on, found by name in a file's own schema.
 */
final class EntryFields {
  static final int SKIP = 0;
  static final int STATUS = 1;
  static final int SNAPSHOT = 2;
  static final int SEQUENCE = 3;
  static final int FILE_SEQUENCE = 4;
  static final int DATA_FILE = 5;
  private static final String[] NAMES = {null, "status", "snapshot_id", "sequence_number", "file_sequence_number",
      "data_file"};

  private EntryFields() {
  }

  /** Per field of the entry record {@code entry}, what it is (SKIP: another field). */
  static int[] of(AvroBinary.Node entry) {
    int[] out = new int[entry.names.length];
    for (int i = 0; i < out.length; i++) {
      for (int a = 1; a < NAMES.length; a++) {
        if (NAMES[a].equals(entry.names[i])) {
          out[i] = a;
        }
      }
    }
    return out;
  }
}
