"""What the shim's parser routes to Python (io.lakerules.Bridge.routed): texts that may start,
after comments, with one of the statements lakerules.sql.statements parses, or EXPLAIN (so that
EXPLAIN of a lake command shows its plan). Cheap and conservative: the dialect then decides
(lakerules.sql.dialect), and a text that is not ours goes to Spark's parser unchanged.

No imports: the jar build (jvm-shim/shim_build.py) reads this file on its own, without the
package's dependencies, and writes ROUTES into the jar."""

LEAD = r"(?:\s+|/\*.*?\*/|--[^\n]*(?:\n|$))*"
ROUTES = rf"{LEAD}(?:ALTER\s+TABLE\b.*\b(?:(?:ADD|DROP|REPLACE)\s+PARTITION\s+FIELD|(?:CREATE|REPLACE|DROP)\s+(?:OR\s+REPLACE\s+)?(?:BRANCH|TAG)|WRITE\s+(?:LOCALLY|ORDERED|DISTRIBUTED|UNORDERED)|(?:SET|DROP)\s+IDENTIFIER\s+FIELDS)\b|EXPLAIN\b|OPTIMIZE\b|CALL\b|DESC(?:RIBE)?\s+HISTORY\b|RESTORE\b|VACUUM\b)"
