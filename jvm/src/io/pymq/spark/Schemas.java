package io.pymq.spark;

import java.util.HashSet;
import java.util.Locale;
import java.util.Set;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/** A schema given to a read picks columns, as connector/spark/options.py check_read_schema. */
final class Schemas {
  private Schemas() {}

  static StructType check(StructType schema) {
    StructType known = PyMQJvmSource.READ_SCHEMA;
    Set<String> names = new HashSet<>(java.util.Arrays.asList(known.fieldNames()));
    Set<String> seen = new HashSet<>();
    for (StructField f : schema.fields()) {
      if (!names.contains(f.name())) {
        String hint = null;
        for (String n : names) {
          if (n.toLowerCase(Locale.ROOT).equals(f.name().toLowerCase(Locale.ROOT))) {
            hint = n;
          }
        }
        if (hint == null) {
          hint = ReadOptions.closest(f.name(), names);
        }
        throw ReadOptions.bad("column " + f.name() + " is not in pymq's read schema"
            + (hint == null ? "" : "; did you mean " + hint + "?"));
      }
      DataType kind = known.apply(f.name()).dataType();
      if (!kind.equals(f.dataType())) {
        throw ReadOptions.bad("column " + f.name() + " is " + kind.simpleString()
            + " in pymq's read schema, not " + f.dataType().simpleString());
      }
      if (!f.nullable()) {
        throw ReadOptions.bad("column " + f.name() + " may be null in pymq's read schema");
      }
      if (!seen.add(f.name())) {
        throw ReadOptions.bad("column " + f.name() + " is given twice");
      }
    }
    if (seen.isEmpty()) {
      throw ReadOptions.bad("the schema given to the read has no columns");
    }
    return schema;
  }
}
