#!/usr/bin/env python3
"""Checks that every include in the tree points down the layering, and that no source is long.

Usage: check_layering.py [--table FILE] ROOT

Reads the table (default ROOT/cmake/layering.txt; its header says the format), then every
.h/.cc/.capnp source under ROOT (skipping build/ and dot folders). Fails (exit 1), printing
one line per finding as `path:line: what`, when
  - a source includes tessera/<module>/... of a module its own module does not declare, or of
    a module on the same or a higher level (named as above it);
  - a source lies outside every module folder of the table;
  - a non-test source has more lines than the limit and no `long` row naming it;
  - the table itself is inconsistent (unknown module named, a declared module not below);
  - a `long` row names a file that does not exist or is no longer over the limit;
  - a source of a module contains a word a `names` row keeps out of it (the engine naming a
    data type family's commands or kinds: they live in the family's module);
  - a Catch2 TEST_CASE name contains ';' (CMake splits the name there, so ctest runs halves
    of it that match nothing: the test fails in CI, or, without -w NoTests, never runs).
Exit 0 and one summary line otherwise; exit 2 on an unreadable table.
"""
import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".cc", ".capnp")
# TEST_CASE( followed by its name: one or more adjacent string literals.
TEST_NAME = re.compile(r'TEST_CASE\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)')
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]tessera/([A-Za-z0-9_]+)/')


class TableError(Exception):
    pass


def read_table(path):
    modules, long_files, limit, banned = {}, {}, None, []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            words = line.split()
            kind = words[0]
            where = f"{path}:{number}"
            if kind == "limit" and len(words) == 2 and words[1].isdigit():
                limit = int(words[1])
            elif kind == "module" and len(words) >= 4 and words[3].isdigit():
                name, folder, level, allowed = words[1], words[2].rstrip("/"), int(words[3]), words[4:]
                if name in modules:
                    raise TableError(f"{where}: module '{name}' is listed twice")
                modules[name] = {"folder": folder, "level": level, "allowed": allowed,
                                 "where": where}
            elif kind == "long" and len(words) >= 3:
                long_files[words[1]] = " ".join(words[2:])
            elif kind == "names" and len(words) >= 4:
                banned.append({"module": words[1], "owner": words[2], "words": words[3:],
                               "where": where})
            else:
                raise TableError(f"{where}: cannot read '{line}'; expected 'limit N', "
                                 "'module NAME FOLDER LEVEL [MODULE...]', 'long PATH REASON' or "
                                 "'names MODULE OWNER WORD...'")
    if limit is None:
        raise TableError(f"{path}: no 'limit N' line")
    for row in banned:
        for name in (row["module"], row["owner"]):
            if name not in modules:
                raise TableError(f"{row['where']}: 'names' row names unknown module '{name}'")
        row["pattern"] = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(
            re.escape(w) for w in row["words"]) + r")(?![A-Za-z0-9_])")
    return modules, long_files, limit, banned


def check_table(modules):
    findings = []
    for name, m in modules.items():
        for dep in m["allowed"]:
            if dep == "*":
                continue
            if dep not in modules:
                findings.append(f"{m['where']}: module '{name}' names unknown module '{dep}'")
            elif modules[dep]["level"] >= m["level"]:
                findings.append(f"{m['where']}: module '{name}' (level {m['level']}) names "
                                f"'{dep}' (level {modules[dep]['level']}), which is not below it")
    return findings


def sources(root):
    for directory, subdirs, files in os.walk(root):
        rel_dir = os.path.relpath(directory, root)
        subdirs[:] = sorted(d for d in subdirs
                            if not d.startswith(".") and not (rel_dir == "." and d == "build"))
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.normpath(os.path.join(rel_dir, name))


def owner_of(path, modules):
    best = None
    for name, m in modules.items():
        folder = m["folder"]
        if path.startswith(folder + "/") and (best is None or
                                              len(folder) > len(modules[best]["folder"])):
            best = name
    return best


def check_tree(root, modules, long_files, limit, banned=()):
    findings = []
    checked = 0
    seen_long = set()
    for path in sources(root):
        module = owner_of(path, modules)
        if module is None:
            findings.append(f"{path}:1: outside every module folder of the layering table; add "
                            "its module to cmake/layering.txt")
            continue
        checked += 1
        m = modules[module]
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for row in banned:
            if row["module"] != module:
                continue
            for number, line in enumerate(lines, 1):
                for word in row["pattern"].findall(line):
                    findings.append(f"{path}:{number}: names '{word}' of module "
                                    f"'{row['owner']}'; module '{module}' must not (it reaches "
                                    "a family through map/family.h): move the code there")
        for number, line in enumerate(lines, 1):
            hit = INCLUDE.match(line)
            if not hit:
                continue
            target = hit.group(1)
            if target == module or "*" in m["allowed"]:
                continue
            include = line.strip()
            if target not in modules:
                findings.append(f"{path}:{number}: {include}: tessera/{target}/ is no module of "
                                "the layering table")
            elif modules[target]["level"] >= m["level"]:
                findings.append(f"{path}:{number}: {include}: module '{module}' (level "
                                f"{m['level']}) includes '{target}' (level "
                                f"{modules[target]['level']}), which is not below it")
            elif target not in m["allowed"]:
                findings.append(f"{path}:{number}: {include}: module '{module}' does not declare "
                                f"'{target}' in cmake/layering.txt")
        if module == "tests":
            text = "".join(lines)
            for hit in TEST_NAME.finditer(text):
                name = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', hit.group(1)))
                if ";" in name:
                    number = text.count("\n", 0, hit.start()) + 1
                    findings.append(f"{path}:{number}: test name '{name}' contains ';', where "
                                    "CMake splits it; use ',' instead")
            continue
        if len(lines) > limit:
            if path in long_files:
                seen_long.add(path)
            else:
                findings.append(f"{path}:1: {len(lines)} lines, over the limit of {limit}; split "
                                "it, or name it on a 'long' row with the reason")
    for path in sorted(set(long_files) - seen_long):
        findings.append(f"cmake/layering.txt: 'long {path}' names no source over {limit} lines; "
                        "remove the row")
    return findings, checked


def main(argv):
    args = argv[1:]
    table = None
    if len(args) >= 2 and args[0] == "--table":
        table, args = args[1], args[2:]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = args[0]
    table = table or os.path.join(root, "cmake", "layering.txt")
    try:
        modules, long_files, limit, banned = read_table(table)
    except (OSError, TableError) as e:
        print(f"layering: {e}", file=sys.stderr)
        return 2
    findings = check_table(modules)
    tree_findings, checked = check_tree(root, modules, long_files, limit, banned)
    findings += tree_findings
    for finding in findings:
        print(finding)
    if findings:
        print(f"layering: {len(findings)} finding(s) in {checked} sources", file=sys.stderr)
        return 1
    print(f"layering: {checked} sources in {len(modules)} modules, every include points down, "
          f"none over {limit} lines without a reason")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
