"""The rules of the registry: one module per rewrite, one public function of the same name."""
