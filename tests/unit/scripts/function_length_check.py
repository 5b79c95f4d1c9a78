#!/usr/bin/env python3
"""No function of the daemon's source is longer than 60 lines.

A function is counted from the first line of its declaration to its closing
brace, lambdas and local classes inside it included. Functions defined in a
class body count as well; brace initialisers (of members, of tables) do not.

Usage: function_length_check.py SOURCE_DIR   exit 0 when every function of src/ fits, 1 (one line each) when not
       function_length_check.py --self-test  the parser run on small snippets: each must measure as expected
"""
import pathlib
import re
import sys

MAX_LINES = 60
SUFFIXES = (".cpp", ".hpp", ".h")

RAW_STRING = re.compile(r'R"([^(\s]*)\(')


def blank_out(text):
    """The text with comments, strings, character literals and preprocessor lines
    replaced by spaces, newlines kept, so that braces are code and line numbers hold."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            end = i
            while end < n and (text[end] != "\n" or text[end - 1] == "\\"):
                end += 1
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        if c == "\n":
            line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif (m := RAW_STRING.match(text, i)) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = text.find(")" + m.group(1) + '"', m.end())
            end = n if close < 0 else close + len(m.group(1)) + 2
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):  # 1'000'000 is a number
            end = i + 1
            while end < n and text[end] != c:
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, n)
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:end]))
        i = end
    return "".join(out)


def matching_brace(code, open_at):
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


ACCESS = re.compile(r"\s*(?:public|private|protected)\s*:(?!:)")
SCOPE = re.compile(r"^\s*(?:template\s*<.*>\s*)?(namespace\b|extern\s*$|(?:class|struct|union|enum)\b)", re.S)


def kind_of(header):
    """What a brace at namespace or class scope opens, from the text before it."""
    h = " ".join(header.split())
    m = SCOPE.match(h)
    if m:
        return "scope" if not m.group(1).startswith("enum") else "other"
    if re.search(r"=\s*\[[^\]]*\]", h):  # a lambda at namespace scope
        return "function"
    prefix = h.split("(")[0]
    if "(" not in h or ("operator" not in prefix and re.search(r"(?<![=!<>])=(?!=)", prefix)):
        return "other"  # a table or an initialiser
    return "function"


def name_of(header, scopes):
    before = " ".join(header.split()).split("(")[0].strip()
    name = before.split()[-1] if before.split() else "?"
    if "::" not in name and scopes:
        name = "::".join(scopes + [name])
    return name.lstrip("*&")


def functions(text):
    """(name, first line, last line) of each function of a C++ source."""
    code = blank_out(text)
    found = []

    def scan(start, end, scopes):
        header_start = start
        i = start
        while i < end:
            c = code[i]
            if c in ";}":
                header_start = i + 1
            elif c == "{":
                header = code[header_start:i]
                close = matching_brace(code, i)
                kind = kind_of(header)
                following = code[close + 1:close + 40].lstrip()
                if kind == "function" and following[:1] in (",", "{"):
                    i = close + 1  # a member's brace initialiser in a constructor's list
                    continue
                if kind == "function":
                    label = ACCESS.match(header)
                    first = header_start + (label.end() if label else 0)
                    first += len(code[first:i]) - len(code[first:i].lstrip())
                    found.append((name_of(header, scopes), code.count("\n", 0, first) + 1,
                                  code.count("\n", 0, close) + 1))
                elif kind == "scope":
                    words = re.split(r"(?<!:):(?!:)", " ".join(header.split()))[0].split()  # not its bases
                    inner = [] if words and words[0] in ("namespace", "extern") else [words[-1]] if words else []
                    scan(i + 1, close, scopes + inner)
                i = close + 1
                header_start = i
                continue
            i += 1

    scan(0, len(code), [])
    return found


def too_long(root):
    problems = []
    for path in sorted((root / "src").rglob("*")):
        if path.suffix not in SUFFIXES or not path.is_file():
            continue
        for name, first, last in functions(path.read_text(errors="replace")):
            if last - first + 1 > MAX_LINES:
                problems.append(f"{path.relative_to(root)}:{first}: {name} is {last - first + 1} lines "
                                f"(at most {MAX_LINES}): split it")
    return problems


SNIPPETS = [
    # (source, [(name, lines)])
    ("int f() {\n  return 1;\n}\n", [("f", 3)]),
    ("namespace a {\nnamespace {\nvoid g(int x,\n       int y) {\n  if (x) {\n    y++;\n  }\n}\n}  // namespace\n}\n",
     [("g", 6)]),
    ("class C {\n public:\n  int get() const { return v_; }\n  int v_{3};\n  Fd fd_{open_it()};\n};\n",
     [("C::get", 1)]),
    ("struct Tracer::Impl : Base {\n  bool handle(int x) {\n    return x;\n  }\n};\n", [("Tracer::Impl::handle", 3)]),
    ("C::C(int a)\n    : a_(a), b_{a, 2}, c_{} {\n  start();\n}\n", [("C::C", 4)]),
    ("const Option kOptions[] = {\n  {\"port\", \"{\"},\n  {\"x\", nullptr},\n};\nvoid h() {}\n", [("h", 1)]),
    ("void k() {\n  auto l = [](int x) {\n    return x;\n  };\n  // }\n  const char *s = \"}\";\n  char c = '}';\n}\n",
     [("k", 8)]),
    ("std::string page() {\n  return R\"(\n}\n)\";\n}\nenum class E : int { A, B };\nstruct S {\n  void m();\n};\n",
     [("page", 5)]),
    ("#define BLOCK(x) { x }\nconstexpr uint64_t kBig = 1'000'000;\nbool operator==(const A &a, const A &b) {\n"
     "  return a.v == b.v;\n}\n", [("operator==", 3)]),
]


def self_test():
    failures = 0
    for source, expected in SNIPPETS:
        got = [(name, last - first + 1) for name, first, last in functions(source)]
        if got != expected:
            failures += 1
            print(f"self-test: expected {expected}, measured {got} in:\n{source}")
    long_one = "void long_one() {\n" + "  step();\n" * MAX_LINES + "}\n"
    tmp = pathlib.Path(__import__("tempfile").mkdtemp())
    (tmp / "src").mkdir()
    (tmp / "src" / "a.cpp").write_text(long_one)
    problems = too_long(tmp)
    if len(problems) != 1 or "long_one is 62 lines" not in problems[0]:
        failures += 1
        print(f"self-test: a 62-line function not reported as such: {problems}")
    (tmp / "src" / "a.cpp").unlink()
    (tmp / "src").rmdir()
    tmp.rmdir()
    return 1 if failures else 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-2].strip())
        return 2
    problems = too_long(pathlib.Path(argv[1]))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
