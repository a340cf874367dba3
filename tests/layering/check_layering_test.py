#!/usr/bin/env python3
"""Tests of check_layering.py on small trees made in a temporary folder: it must fail, naming
the file, the line and the include, on each kind of violation, and pass a clean tree."""
import os
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layering.py")

TABLE = """limit 10
module base   core/base  0
module wire   core/wire  1  base
module map    map        2  base
module grid   grid       3  base wire map
module tests  tests      4  *
"""


class LayeringCheck(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.write("cmake/layering.txt", TABLE)
        self.write("core/base/include/tessera/base/error.h", "#pragma once\n")
        self.write("core/wire/src/frame.cc", '#include "tessera/base/error.h"\n')
        self.write("map/src/map.cc", '#include "tessera/base/error.h"\n#include "local.h"\n')
        self.write("grid/src/client.cc",
                   '#include "tessera/map/map.h"\n#include <tessera/wire/frame.h>\n')
        self.write("tests/unit/grid/client_test.cc", '#include "tessera/grid/client.h"\n' +
                   "// line\n" * 40)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)

    def run_check(self):
        p = subprocess.run([sys.executable, CHECKER, self.root], capture_output=True, text=True)
        return p.returncode, p.stdout

    def test_clean_tree_passes(self):
        code, out = self.run_check()
        self.assertEqual(code, 0, out)
        self.assertIn("every include points down", out)

    def test_upward_include_fails_naming_file_line_and_include(self):
        self.write("map/src/map.cc", '#include "tessera/base/error.h"\n'
                   '#include "tessera/grid/client.h"\n')
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn('map/src/map.cc:2: #include "tessera/grid/client.h": module \'map\' '
                      "(level 2) includes 'grid' (level 3), which is not below it", out)

    def test_a_banned_word_in_a_module_fails_naming_it(self):
        self.write("cmake/layering.txt", TABLE + "names map grid hset __hash: ValueKind::kHash\n")
        self.write("map/src/map.cc", '#include "tessera/base/error.h"\n'
                   'if (cmd == "hset") return;  // ValueKind::kHash\n'
                   'auto n = "__hash:" + key;  // hsetx and khset stay\n')
        code, out = self.run_check()
        self.assertEqual(code, 1, out)
        self.assertIn("map/src/map.cc:2: names 'hset' of module 'grid'", out)
        self.assertIn("map/src/map.cc:2: names 'ValueKind::kHash' of module 'grid'", out)
        self.assertIn("map/src/map.cc:3: names '__hash:' of module 'grid'", out)
        self.assertNotIn("hsetx", out)
        self.assertNotIn("khset", out)
        # The same words elsewhere are fine.
        self.write("map/src/map.cc", '#include "tessera/base/error.h"\n')
        self.write("grid/src/client.cc", '#include "tessera/map/map.h"\n// hset\n')
        code, out = self.run_check()
        self.assertEqual(code, 0, out)

    def test_same_level_include_fails(self):
        self.write("core/wire/src/frame.cc", '#include "tessera/map/map.h"\n')
        self.write("cmake/layering.txt", TABLE.replace("map    map        2", "map    map        1"))
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn("core/wire/src/frame.cc:1:", out)
        self.assertIn("which is not below it", out)

    def test_undeclared_lower_include_fails(self):
        self.write("map/src/codec.cc", '#include "tessera/wire/frame.h"\n')
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn("map/src/codec.cc:1: #include \"tessera/wire/frame.h\": module 'map' does "
                      "not declare 'wire'", out)

    def test_unknown_module_include_fails(self):
        self.write("grid/src/x.cc", '#include "tessera/saga/outbox.h"\n')
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn("grid/src/x.cc:1:", out)
        self.assertIn("tessera/saga/ is no module", out)

    def test_source_outside_every_module_fails(self):
        self.write("saga/src/outbox.cc", "int x;\n")
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn("saga/src/outbox.cc:1: outside every module folder", out)

    def test_long_source_fails_unless_named_with_a_reason(self):
        self.write("grid/src/big.cc", "// line\n" * 11)
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn("grid/src/big.cc:1: 11 lines, over the limit of 10", out)
        self.write("cmake/layering.txt", TABLE + "long grid/src/big.cc generated table\n")
        code, out = self.run_check()
        self.assertEqual(code, 0, out)

    def test_stale_long_row_fails(self):
        self.write("cmake/layering.txt", TABLE + "long grid/src/client.cc was long once\n")
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn("'long grid/src/client.cc' names no source over 10 lines", out)

    def test_tests_are_exempt_from_the_limit_and_may_include_any_module(self):
        code, out = self.run_check()  # setUp's test file has 41 lines and includes grid
        self.assertEqual(code, 0, out)

    def test_test_name_with_a_semicolon_fails(self):
        self.write("tests/unit/map/map_test.cc",
                   'TEST_CASE(\n    "Puts apply once; "\n    "gets see them", "[map]") {}\n'
                   'TEST_CASE("A name, with a comma", "[map]") {}\n')
        code, out = self.run_check()
        self.assertEqual(code, 1, out)
        self.assertIn("tests/unit/map/map_test.cc:1: test name 'Puts apply once; gets see them' "
                      "contains ';'", out)
        self.assertNotIn("with a comma", out)

    def test_table_naming_a_module_not_below_fails(self):
        self.write("cmake/layering.txt", TABLE.replace("map    map        2  base",
                                                       "map    map        2  base grid"))
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn("module 'map' (level 2) names 'grid' (level 3), which is not below it", out)

    def test_unreadable_table_is_a_clear_error(self):
        self.write("cmake/layering.txt", "limit ten\n")
        p = subprocess.run([sys.executable, CHECKER, self.root], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("cannot read 'limit ten'", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
