"""The JVM's way into Python: the callbacks the shim makes (parse a statement, rewrite a plan,
answer a catalog operation, run a planned command), the context a statement runs with, and the
process a JVM-only driver starts (``python -m lakerules.jvm_driver``).

Owns: ``bridge`` (the Py4J callback object), ``catalog_ops`` (LakeCatalog's operations),
``context``, ``jvm_driver``. May import every package below it; nothing imports it but the
package's public face (``lakerules``).
"""
