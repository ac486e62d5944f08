"""repo_map on a tiny repository per language: each one's definitions are named, methods under
their class, and the cross-file reference ranks the used file first; a language without a
grammar is named, never an error."""
from __future__ import annotations

import pytest

from clover_cli.tools.registry import run_tool
from clover_cli.tools.repomap.languages import GRAMMARS, available

# language -> (files, definitions the map must show, (method line, its class line) or None)
REPOS = {
    "javascript": ({
        "lib/store.js": "export class ShoppingStore {\n  addProduct(item) {\n    return item;\n  }\n}\n"
                        "export function createStore() {\n  return new ShoppingStore();\n}\n"
                        "export const makeCart = () => createStore();\n",
        "app.jsx": "import { createStore } from './lib/store';\nconst shop = createStore();\n"
                   "shop.addProduct(1);\n",
    }, ["class ShoppingStore", "addProduct(item)", "function createStore()", "makeCart"],
        ("addProduct(item)", "class ShoppingStore")),
    "typescript": ({
        "src/model.ts": "export interface ShapeConfig {\n  width: number;\n}\n"
                        "export type ShapeId = string;\n"
                        "export class ShapeBuilder {\n  buildShape(cfg: ShapeConfig): ShapeId {\n"
                        "    return 'x';\n  }\n}\nexport enum ShapeKind { Round, Square }\n",
        "src/view.tsx": "import { ShapeBuilder, ShapeConfig } from './model';\n"
                        "export function ShapeView(props: ShapeConfig) {\n"
                        "  return <div>{new ShapeBuilder().buildShape(props)}</div>;\n}\n",
    }, ["interface ShapeConfig", "type ShapeId", "class ShapeBuilder", "buildShape(cfg",
        "enum ShapeKind", "function ShapeView"], ("buildShape(cfg", "class ShapeBuilder")),
    "go": ({
        "store/store.go": "package store\n\nconst MaxItems = 10\n\ntype Inventory struct {\n"
                          "\tItems []string\n}\n\nfunc NewInventory() *Inventory {\n"
                          "\treturn &Inventory{}\n}\n\nfunc (s *Inventory) AddItem(x string) {\n"
                          "\ts.Items = append(s.Items, x)\n}\n",
        "main.go": "package main\n\nimport \"example/store\"\n\nfunc main() {\n"
                   "\tinv := store.NewInventory()\n\tinv.AddItem(\"a\")\n}\n",
    }, ["type Inventory struct", "func NewInventory()", "func (s *Inventory) AddItem",
        "MaxItems"], None),
    "rust": ({
        "src/engine.rs": "pub struct RenderEngine {\n    frames: u32,\n}\n\n"
                         "impl RenderEngine {\n    pub fn draw_frame(&mut self) -> u32 {\n"
                         "        self.frames += 1;\n        self.frames\n    }\n}\n\n"
                         "pub trait Drawable {\n    fn render(&self);\n}\n\n"
                         "pub const FRAME_LIMIT: u32 = 60;\n",
        "src/main.rs": "mod engine;\nuse engine::RenderEngine;\nfn main() {\n"
                       "    let mut e = RenderEngine { frames: 0 };\n    e.draw_frame();\n}\n",
    }, ["pub struct RenderEngine", "pub fn draw_frame", "pub trait Drawable", "FRAME_LIMIT"],
        ("pub fn draw_frame", "impl RenderEngine")),
    "java": ({
        "src/Account.java": "package bank;\n\npublic class Account {\n"
                            "    public Account(int balance) {}\n"
                            "    public int withdrawFunds(int amount) {\n        return amount;\n"
                            "    }\n}\n\ninterface Auditable {\n    void auditTrail();\n}\n",
        "src/Main.java": "package bank;\n\npublic class Main {\n"
                         "    public static void main(String[] a) {\n"
                         "        new Account(1).withdrawFunds(2);\n    }\n}\n",
    }, ["public class Account", "public int withdrawFunds", "interface Auditable"],
        ("public int withdrawFunds", "public class Account")),
    "c": ({
        "src/buffer.h": "typedef struct ring_buffer {\n  int size;\n} ring_buffer;\n"
                        "int buffer_push(ring_buffer *b, int v);\n#define BUFFER_MAX 64\n",
        "src/buffer.c": "#include \"buffer.h\"\n\nint buffer_push(ring_buffer *b, int v) {\n"
                        "  return b->size + v;\n}\n\nstatic char *buffer_name(void) {\n"
                        "  return \"ring\";\n}\n",
        "main.c": "#include \"src/buffer.h\"\nint main(void) {\n  ring_buffer b;\n"
                  "  return buffer_push(&b, BUFFER_MAX);\n}\n",
    }, ["typedef struct ring_buffer", "int buffer_push(", "BUFFER_MAX", "buffer_name(void)"], None),
    "cpp": ({
        "src/matrix.hpp": "namespace linalg {\nclass DenseMatrix {\n public:\n"
                          "  double traceValue() const;\n  int rowCount() const { return 1; }\n"
                          "};\n}\n",
        "src/matrix.cpp": "#include \"matrix.hpp\"\n"
                          "double linalg::DenseMatrix::traceValue() const {\n  return 0.0;\n}\n",
        "main.cc": "#include \"src/matrix.hpp\"\nint main() {\n  linalg::DenseMatrix m;\n"
                   "  return m.rowCount() + m.traceValue();\n}\n",
    }, ["namespace linalg", "class DenseMatrix", "double traceValue() const;",
        "int rowCount() const", "double linalg::DenseMatrix::traceValue()"],
        ("double traceValue() const;", "class DenseMatrix")),
    "ruby": ({
        "lib/ledger.rb": "module Accounting\n  class Ledger\n    LIMIT = 5\n"
                         "    def record_entry(amount)\n      amount\n    end\n\n"
                         "    def self.open_book\n      new\n    end\n  end\nend\n",
        "app.rb": "require_relative 'lib/ledger'\n"
                  "Accounting::Ledger.open_book.record_entry(3)\n",
    }, ["module Accounting", "class Ledger", "def record_entry(amount)", "def self.open_book"],
        ("def record_entry(amount)", "class Ledger")),
}
MODULE = {"javascript": "tree_sitter_javascript", "typescript": "tree_sitter_typescript",
          "go": "tree_sitter_go", "rust": "tree_sitter_rust", "java": "tree_sitter_java",
          "c": "tree_sitter_c", "cpp": "tree_sitter_cpp", "ruby": "tree_sitter_ruby"}


@pytest.mark.parametrize("language", sorted(REPOS))
def test_each_language_maps_its_definitions(language, plain_dir):
    assert available(MODULE[language]), f"grammar wheel for {language} is not installed"
    files, wanted, nested = REPOS[language]
    for rel, text in files.items():
        (plain_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (plain_dir / rel).write_text(text)
    res = run_tool("repo_map", {"budget_tokens": 2000}, plain_dir)
    assert res.ok, res.output
    assert res.details["files"] == len(files) and res.details["parsed"] == len(files)
    for name in wanted:
        assert name in res.output, (name, res.output)
    lines = res.output.splitlines()
    if nested:  # the method is shown below its class/impl line, indented as in the source
        method = next(i for i, ln in enumerate(lines) if nested[0] in ln)
        parent = next(i for i, ln in enumerate(lines) if nested[1] in ln)
        assert parent < method
    # the file the others use comes first (the reference graph works for this language)
    first = lines[1].rstrip(":")
    assert first == next(iter(files)), res.output


def test_every_mapped_extension_has_a_query():
    from clover_cli.tools.repomap.queries import QUERIES
    assert set(GRAMMARS.values()) - {("tree_sitter_python", "language")} <= set(QUERIES)


def test_languages_without_a_grammar_are_named(plain_dir):
    (plain_dir / "Main.kt").write_text("fun main() = println(1)\n")
    (plain_dir / "App.swift").write_text("struct App {}\n")
    only = run_tool("repo_map", {}, plain_dir)
    assert only.ok and "Main.kt" in only.output and "App.swift" in only.output
    (plain_dir / "tool.py").write_text("def helper_function():\n    pass\n")
    mixed = run_tool("repo_map", {}, plain_dir)
    assert mixed.ok and "helper_function" in mixed.output
    assert "Not parsed (no grammar installed for their language): App.swift, Main.kt" in mixed.output
