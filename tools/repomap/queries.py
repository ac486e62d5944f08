"""Tag queries for the languages the repo map parses with tree-sitter (Python has its own
faster tree walk in tags.py).

Written here for this map, after the idea of tree-sitter's tags queries and Aider's repo map
(both use `@definition.KIND` captures around a `@name`): each entry is

    (definition query, identifier node types counted as references)

A definition's capture is the node whose first line is shown; its kind (class, function,
method, ...) decides nesting: a definition inside a class/interface/module/impl is shown under
that line. References are every identifier-like leaf of the syntax tree (so names in comments
and strings do not count), minus the ones at definition sites in the same file, which the
ranking ignores anyway (rank.py).
"""
from __future__ import annotations

CONTAINERS = {"class", "interface", "module", "impl"}

_JS_COMMON = """
(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(method_definition name: [(property_identifier) (private_property_identifier)] @name) @definition.method
(variable_declarator name: (identifier) @name
  value: [(arrow_function) (function_expression) (class)]) @definition.function
(program (lexical_declaration (variable_declarator name: (identifier) @name) @definition.constant))
(program (export_statement (lexical_declaration
  (variable_declarator name: (identifier) @name) @definition.constant)))
(assignment_expression
  left: (member_expression property: (property_identifier) @name)
  right: [(arrow_function) (function_expression)]) @definition.function
"""

JAVASCRIPT = _JS_COMMON + """
(class_declaration name: (identifier) @name) @definition.class
"""

TYPESCRIPT = _JS_COMMON + """
(class_declaration name: (type_identifier) @name) @definition.class
(abstract_class_declaration name: (type_identifier) @name) @definition.class
(interface_declaration name: (type_identifier) @name) @definition.interface
(type_alias_declaration name: (type_identifier) @name) @definition.type
(enum_declaration name: (identifier) @name) @definition.type
(function_signature name: (identifier) @name) @definition.function
(method_signature name: (property_identifier) @name) @definition.method
(abstract_method_signature name: (property_identifier) @name) @definition.method
(internal_module name: (identifier) @name) @definition.module
"""

GO = """
(function_declaration name: (identifier) @name) @definition.function
(method_declaration name: (field_identifier) @name) @definition.method
(type_spec name: (type_identifier) @name) @definition.type
(method_elem name: (field_identifier) @name) @definition.method
(source_file (const_declaration (const_spec name: (identifier) @name) @definition.constant))
(source_file (var_declaration (var_spec name: (identifier) @name) @definition.variable))
"""

RUST = """
(function_item name: (identifier) @name) @definition.function
(function_signature_item name: (identifier) @name) @definition.function
(struct_item name: (type_identifier) @name) @definition.class
(enum_item name: (type_identifier) @name) @definition.class
(union_item name: (type_identifier) @name) @definition.class
(trait_item name: (type_identifier) @name) @definition.interface
(impl_item type: [(type_identifier) (generic_type type: (type_identifier))] @name) @definition.impl
(type_item name: (type_identifier) @name) @definition.type
(mod_item name: (identifier) @name) @definition.module
(macro_definition name: (identifier) @name) @definition.macro
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.constant
"""

JAVA = """
(class_declaration name: (identifier) @name) @definition.class
(interface_declaration name: (identifier) @name) @definition.interface
(enum_declaration name: (identifier) @name) @definition.class
(record_declaration name: (identifier) @name) @definition.class
(annotation_type_declaration name: (identifier) @name) @definition.interface
(method_declaration name: (identifier) @name) @definition.method
(constructor_declaration name: (identifier) @name) @definition.method
"""

_C_COMMON = """
(function_definition declarator: (function_declarator declarator: (identifier) @name)) @definition.function
(function_definition declarator: (pointer_declarator
  declarator: (function_declarator declarator: (identifier) @name))) @definition.function
(declaration declarator: (function_declarator declarator: (identifier) @name)) @definition.function
(declaration declarator: (pointer_declarator
  declarator: (function_declarator declarator: (identifier) @name))) @definition.function
(struct_specifier name: (type_identifier) @name body: (_)) @definition.class
(union_specifier name: (type_identifier) @name body: (_)) @definition.class
(enum_specifier name: (type_identifier) @name body: (_)) @definition.type
(type_definition declarator: (type_identifier) @name) @definition.type
(preproc_def name: (identifier) @name) @definition.macro
(preproc_function_def name: (identifier) @name) @definition.macro
"""

C = _C_COMMON

CPP = _C_COMMON + """
(class_specifier name: (type_identifier) @name body: (_)) @definition.class
(namespace_definition name: (namespace_identifier) @name) @definition.module
(function_definition declarator: (function_declarator
  declarator: (field_identifier) @name)) @definition.method
(function_definition declarator: (function_declarator
  declarator: (qualified_identifier name: (identifier) @name))) @definition.method
(function_definition declarator: (function_declarator
  declarator: (qualified_identifier name: (qualified_identifier
    name: (identifier) @name)))) @definition.method
(function_definition declarator: (function_declarator
  declarator: (qualified_identifier name: (qualified_identifier name: (qualified_identifier
    name: (identifier) @name))))) @definition.method
(field_declaration declarator: (function_declarator
  declarator: (field_identifier) @name)) @definition.method
"""

RUBY = """
(method name: (_) @name) @definition.method
(singleton_method name: (_) @name) @definition.method
(class name: (constant) @name) @definition.class
(class name: (scope_resolution name: (constant) @name)) @definition.class
(module name: (constant) @name) @definition.module
(module name: (scope_resolution name: (constant) @name)) @definition.module
(program (assignment left: (constant) @name) @definition.constant)
"""

# Python is mapped by the tree walk in tags.py (faster); this query is its cross-check in tests
PYTHON = """
(class_definition name: (identifier) @name) @definition.class
(function_definition name: (identifier) @name) @definition.function
(module (expression_statement (assignment left: (identifier) @name)) @definition.constant)
"""

# (grammar module, language function) -> (definition query, reference node types)
QUERIES: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    ("tree_sitter_python", "language"): (PYTHON, ("identifier",)),
    ("tree_sitter_javascript", "language"): (JAVASCRIPT, ("identifier", "property_identifier")),
    ("tree_sitter_typescript", "language_typescript"):
        (TYPESCRIPT, ("identifier", "property_identifier", "type_identifier")),
    ("tree_sitter_typescript", "language_tsx"):
        (TYPESCRIPT, ("identifier", "property_identifier", "type_identifier")),
    ("tree_sitter_go", "language"):
        (GO, ("identifier", "type_identifier", "field_identifier", "package_identifier")),
    ("tree_sitter_rust", "language"): (RUST, ("identifier", "type_identifier", "field_identifier")),
    ("tree_sitter_java", "language"): (JAVA, ("identifier", "type_identifier")),
    ("tree_sitter_c", "language"): (C, ("identifier", "type_identifier", "field_identifier")),
    ("tree_sitter_cpp", "language"):
        (CPP, ("identifier", "type_identifier", "field_identifier", "namespace_identifier")),
    ("tree_sitter_ruby", "language"): (RUBY, ("identifier", "constant")),
}
