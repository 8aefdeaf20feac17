"""The shell tasks of the built-in Terminal-Bench mini suite (read by make_tasks.py).

Each task: an instruction, the starting files of the agent's folder (``/app``), a reference solution
(bash, run from that folder) and pytest checks (run from that folder, so they use relative paths).
``layout`` picks the public format it is written in: Terminal-Bench 1.x (``tb``) or Harbor (``harbor``).
Starting data is generated from a fixed seed, so the output is deterministic.
"""

from __future__ import annotations

import base64
import gzip
import io
import random
import tarfile
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ShellTask:
    name: str
    category: str
    instruction: str
    solution: str
    checks: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    layout: str = "tb"
    tags: tuple[str, ...] = ()


def _rng(name: str) -> random.Random:
    return random.Random(sum(ord(c) * (i + 1) for i, c in enumerate(name)))


def _tar_gz(members: dict[str, str]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in sorted(members):
            data = members[name].encode()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uname = info.gname = ""
            archive.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0) as handle:
        handle.write(raw.getvalue())
    return packed.getvalue()


NAMES = ["Ada", "Alan", "Barbara", "Claude", "Donald", "Edsger", "Grace", "John", "Ken", "Linus", "Margaret", "Niklaus"]
CITIES = ["Oslo", "Lima", "Kyoto", "Accra", "Quito", "Perth", "Turin", "Hanoi"]
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "while", "the", "cat", "sleeps", "near", "the", "warm", "fire"]

TASKS: list[ShellTask] = []


def task(**kwargs: object) -> None:
    TASKS.append(ShellTask(**kwargs))  # type: ignore[arg-type]


task(
    name="hello-file",
    category="file-operations",
    instruction="Create a file `hello.txt` in the current directory containing exactly `Hello, world!` followed by a single newline.",
    solution="printf 'Hello, world!\\n' > hello.txt\n",
    checks='''
def test_file_exists():
    assert Path("hello.txt").is_file()


def test_exact_content():
    assert Path("hello.txt").read_text() == "Hello, world!\\n"
''',
)

r = _rng("count-lines")
task(
    name="count-lines",
    category="text-processing",
    layout="harbor",
    instruction="Count the lines of `data.txt` and write just the number (digits only, then a newline) to `count.txt`.",
    files={"data.txt": "".join(f"record {r.randint(1000, 9999)}\n" for _ in range(37))},
    solution="wc -l < data.txt | tr -d ' ' > count.txt\n",
    checks='''
def test_count():
    assert Path("count.txt").read_text().strip() == "37"


def test_only_digits():
    assert Path("count.txt").read_text().strip().isdigit()
''',
)

r = _rng("sort-unique")
task(
    name="sort-unique",
    category="text-processing",
    instruction="`names.txt` lists names, some more than once. Write every distinct name exactly once, sorted in byte order (as `LC_ALL=C sort` does), one per line, to `sorted.txt`.",
    files={"names.txt": "".join(f"{r.choice(NAMES)}\n" for _ in range(30))},
    solution="LC_ALL=C sort -u names.txt > sorted.txt\n",
    checks='''
def test_sorted_unique():
    names = Path("names.txt").read_text().split()
    assert Path("sorted.txt").read_text().split("\\n")[:-1] == sorted(set(names))


def test_trailing_newline():
    assert Path("sorted.txt").read_text().endswith("\\n")
''',
)

r = _rng("csv-column")
PEOPLE = "name,age,city\n" + "".join(f"{n},{r.randint(18, 70)},{r.choice(CITIES)}\n" for n in NAMES)
task(
    name="csv-column",
    category="text-processing",
    instruction="`people.csv` has the columns name, age and city. Write the city of every row (without the header), in file order, one per line, to `cities.txt`.",
    files={"people.csv": PEOPLE},
    solution="tail -n +2 people.csv | cut -d, -f3 > cities.txt\n",
    checks='''
def test_cities():
    rows = [line.split(",") for line in Path("people.csv").read_text().splitlines()[1:]]
    assert Path("cities.txt").read_text().splitlines() == [row[2] for row in rows]
''',
)

r = _rng("sum-numbers")
task(
    name="sum-numbers",
    category="text-processing",
    layout="harbor",
    instruction="`numbers.txt` holds one integer per line (some negative). Write their sum to `sum.txt`.",
    files={"numbers.txt": "".join(f"{r.randint(-500, 900)}\n" for _ in range(50))},
    solution="awk '{s += $1} END {print s}' numbers.txt > sum.txt\n",
    checks='''
def test_sum():
    numbers = [int(x) for x in Path("numbers.txt").read_text().split()]
    assert int(Path("sum.txt").read_text().strip()) == sum(numbers)
''',
)

task(
    name="make-executable",
    category="permissions",
    instruction="Make the script `run.sh` executable, then run it and save what it prints to `output.txt`.",
    files={"run.sh": "#!/bin/sh\necho ready\n"},
    solution="chmod +x run.sh\n./run.sh > output.txt\n",
    checks='''
def test_executable():
    assert os.access("run.sh", os.X_OK)


def test_output():
    assert Path("output.txt").read_text() == "ready\\n"
''',
)

task(
    name="secret-permissions",
    category="permissions",
    instruction="Set the permissions of `secret.txt` to read/write for the owner only (mode 600), the directory `public` to mode 755 and `public/index.html` to mode 644. Do not change the file contents.",
    files={"secret.txt": "token=abc123\n", "public/index.html": "<h1>hi</h1>\n"},
    solution="chmod 600 secret.txt\nchmod 755 public\nchmod 644 public/index.html\n",
    checks='''
def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_secret_mode():
    assert mode("secret.txt") == 0o600


def test_public_modes():
    assert mode("public") == 0o755
    assert mode("public/index.html") == 0o644


def test_contents_unchanged():
    assert Path("secret.txt").read_text() == "token=abc123\\n"
''',
)

task(
    name="archive-docs",
    category="archives",
    layout="harbor",
    instruction="Create a gzip-compressed tar archive `docs.tar.gz` of the directory `docs` (member names must start with `docs/`).",
    files={"docs/intro.md": "# Intro\n", "docs/usage.md": "# Usage\nRun it.\n", "docs/faq.md": "# FAQ\n"},
    solution="tar -czf docs.tar.gz docs\n",
    checks='''
import tarfile


def test_archive_members():
    with tarfile.open("docs.tar.gz", "r:gz") as archive:
        names = set(archive.getnames())
    assert {"docs/intro.md", "docs/usage.md", "docs/faq.md"} <= names


def test_archive_content():
    with tarfile.open("docs.tar.gz", "r:gz") as archive:
        assert archive.extractfile("docs/usage.md").read() == b"# Usage\\nRun it.\\n"
''',
)

task(
    name="extract-archive",
    category="archives",
    instruction="Extract `bundle.tar.gz` into a new directory `out` (so that `out/release/config.json` exists), then write the value of the `version` field of that JSON file to `version.txt`.",
    files={"bundle.tar.gz": _tar_gz({"release/config.json": '{"name": "tool", "version": "2.4.1"}\n', "release/bin/tool.sh": "#!/bin/sh\necho tool\n"})},
    solution="mkdir -p out\ntar -xzf bundle.tar.gz -C out\npython3 -c \"import json; print(json.load(open('out/release/config.json'))['version'])\" > version.txt\n",
    checks='''
def test_extracted():
    assert Path("out/release/config.json").is_file()
    assert Path("out/release/bin/tool.sh").is_file()


def test_version():
    assert Path("version.txt").read_text().strip() == "2.4.1"
''',
)

r = _rng("concat-logs")
task(
    name="concat-logs",
    category="file-operations",
    instruction="Concatenate every `.log` file in `logs/` in alphabetical order of file name into `all.log` (ignore other files).",
    files={
        **{f"logs/{n}.log": "".join(f"{n} event {r.randint(1, 99)}\n" for _ in range(3)) for n in ("beta", "alpha", "gamma")},
        "logs/notes.txt": "not a log\n",
    },
    solution="cat logs/alpha.log logs/beta.log logs/gamma.log > all.log\n",
    checks='''
def test_concatenated():
    expected = "".join(Path(f"logs/{n}.log").read_text() for n in ("alpha", "beta", "gamma"))
    assert Path("all.log").read_text() == expected
''',
)

task(
    name="replace-in-file",
    category="text-processing",
    instruction="In `config.ini`, replace every occurrence of `staging` with `production`, editing the file in place. Leave everything else unchanged.",
    files={"config.ini": "[db]\nhost=db.staging.local\nname=app_staging\n\n[web]\nurl=https://staging.example.com\nworkers=4\n"},
    solution="sed -i 's/staging/production/g' config.ini\n",
    checks='''
EXPECTED = "[db]\\nhost=db.production.local\\nname=app_production\\n\\n[web]\\nurl=https://production.example.com\\nworkers=4\\n"


def test_replaced():
    assert "staging" not in Path("config.ini").read_text()


def test_rest_unchanged():
    assert Path("config.ini").read_text() == EXPECTED
''',
)

task(
    name="rename-extension",
    category="file-operations",
    instruction="Rename every `.jpeg` file in `images/` to use the extension `.jpg` instead. Other files stay as they are.",
    files={"images/cat.jpeg": "cat\n", "images/dog.jpeg": "dog\n", "images/logo.png": "png\n"},
    solution="for f in images/*.jpeg; do mv \"$f\" \"${f%.jpeg}.jpg\"; done\n",
    checks='''
def test_renamed():
    assert sorted(os.listdir("images")) == ["cat.jpg", "dog.jpg", "logo.png"]


def test_content_kept():
    assert Path("images/dog.jpg").read_text() == "dog\\n"
''',
)

task(
    name="project-skeleton",
    category="file-operations",
    instruction="Create this layout: `project/src/main.py` containing `print(\"hi\")` (and a newline), an empty directory `project/tests`, and `project/README.md` whose first line is `# project`.",
    solution="mkdir -p project/src project/tests\nprintf 'print(\"hi\")\\n' > project/src/main.py\nprintf '# project\\n' > project/README.md\n",
    checks='''
def test_main():
    assert Path("project/src/main.py").read_text() == 'print("hi")\\n'


def test_tests_dir_empty():
    assert Path("project/tests").is_dir() and not os.listdir("project/tests")


def test_readme():
    assert Path("project/README.md").read_text().splitlines()[0] == "# project"


def test_main_runs():
    out = subprocess.run([sys.executable, "project/src/main.py"], capture_output=True, text=True)
    assert out.stdout == "hi\\n"
''',
)

r = _rng("top-words")
TEXT = " ".join(r.choice(WORDS[:8]) for _ in range(120)).capitalize() + ". The END.\n"
task(
    name="top-words",
    category="text-processing",
    instruction="Find the 3 most frequent words in `text.txt` (words are runs of letters, compared lower-cased). Write them to `top3.txt`, one per line as `word count`, most frequent first, ties broken alphabetically.",
    files={"text.txt": TEXT},
    solution="tr -cs 'A-Za-z' '\\n' < text.txt | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c | sort -k1,1nr -k2,2 | head -3 | awk '{print $2, $1}' > top3.txt\n",
    checks='''
import re
from collections import Counter


def test_top3():
    counts = Counter(w.lower() for w in re.findall(r"[A-Za-z]+", Path("text.txt").read_text()))
    expected = [f"{w} {c}" for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
    assert Path("top3.txt").read_text().splitlines() == expected
''',
)

task(
    name="crlf-to-lf",
    category="text-processing",
    instruction="`dos.txt` uses Windows line endings (CRLF). Convert it in place to Unix line endings (LF) without changing anything else.",
    files={"dos.txt": b"first line\r\nsecond line\r\nthird\tline\r\n"},
    solution="sed -i 's/\\r$//' dos.txt\n",
    checks='''
def test_no_carriage_returns():
    assert b"\\r" not in Path("dos.txt").read_bytes()


def test_content():
    assert Path("dos.txt").read_bytes() == b"first line\\nsecond line\\nthird\\tline\\n"
''',
)

task(
    name="json-fields",
    category="data-processing",
    instruction="Read `user.json`. Write the value of its `name` field to `name.txt` and its `email` field, lower-cased, to `email.txt` (each followed by a newline).",
    files={"user.json": '{"id": 7, "name": "Grace Hopper", "email": "Grace.Hopper@Navy.MIL", "tags": ["cobol"]}\n'},
    solution="python3 - <<'EOF'\nimport json\nuser = json.load(open('user.json'))\nopen('name.txt', 'w').write(user['name'] + '\\n')\nopen('email.txt', 'w').write(user['email'].lower() + '\\n')\nEOF\n",
    checks='''
def test_name():
    assert Path("name.txt").read_text() == "Grace Hopper\\n"


def test_email():
    assert Path("email.txt").read_text() == "grace.hopper@navy.mil\\n"
''',
)

r = _rng("grep-errors")
LOG_LINES = [f"2025-01-0{1 + i % 9} {r.choice(['INFO', 'INFO', 'WARN', 'ERROR'])} job {i} {r.choice(['ok', 'slow', 'failed'])}" for i in range(40)]
task(
    name="grep-errors",
    category="text-processing",
    instruction="Copy every line of `app.log` that contains `ERROR` (in the original order) to `errors.txt`, and write the number of such lines to `error_count.txt`.",
    files={"app.log": "\n".join(LOG_LINES) + "\n"},
    solution="grep ERROR app.log > errors.txt\ngrep -c ERROR app.log > error_count.txt\n",
    checks='''
def expected():
    return [line for line in Path("app.log").read_text().splitlines() if "ERROR" in line]


def test_errors():
    assert Path("errors.txt").read_text().splitlines() == expected()


def test_count():
    assert int(Path("error_count.txt").read_text()) == len(expected())
''',
)

task(
    name="uppercase",
    category="text-processing",
    instruction="Write the contents of `poem.txt` converted to upper case to `POEM.txt` (leave `poem.txt` unchanged).",
    files={"poem.txt": "The fog comes\non little cat feet.\n"},
    solution="tr 'a-z' 'A-Z' < poem.txt > POEM.txt\n",
    checks='''
def test_upper():
    assert Path("POEM.txt").read_text() == "THE FOG COMES\\nON LITTLE CAT FEET.\\n"


def test_original_kept():
    assert Path("poem.txt").read_text() == "The fog comes\\non little cat feet.\\n"
''',
)

r = _rng("dedupe-lines")
task(
    name="dedupe-lines",
    category="text-processing",
    layout="harbor",
    instruction="Write the lines of `items.txt` to `unique.txt`, keeping only the first occurrence of each line and the original order.",
    files={"items.txt": "".join(f"{r.choice(CITIES)}\n" for _ in range(25))},
    solution="awk '!seen[$0]++' items.txt > unique.txt\n",
    checks='''
def test_unique_in_order():
    lines = Path("items.txt").read_text().splitlines()
    assert Path("unique.txt").read_text().splitlines() == list(dict.fromkeys(lines))
''',
)

task(
    name="symlink-latest",
    category="file-operations",
    instruction="Create a symbolic link named `latest` that points to `releases/v2` using a relative target (exactly `releases/v2`).",
    files={"releases/v1/VERSION": "1\n", "releases/v2/VERSION": "2\n"},
    solution="ln -s releases/v2 latest\n",
    checks='''
def test_is_symlink():
    assert os.path.islink("latest")


def test_target():
    assert os.readlink("latest") == "releases/v2"
    assert Path("latest/VERSION").read_text() == "2\\n"
''',
)

r = _rng("checksums")
task(
    name="checksums",
    category="file-operations",
    instruction="Write SHA-256 checksums of every file in `files/` to `SHA256SUMS` in the format printed by `sha256sum files/*` (`<hash>  files/<name>`, sorted by file name).",
    files={
        "files/a.bin": bytes(r.randrange(256) for _ in range(64)),
        "files/b.bin": bytes(r.randrange(256) for _ in range(32)),
        "files/c.txt": "checksum me\n",
    },
    solution="sha256sum files/* > SHA256SUMS\n",
    checks='''
import hashlib


def test_sums():
    lines = Path("SHA256SUMS").read_text().splitlines()
    expected = [
        f"{hashlib.sha256(Path('files', n).read_bytes()).hexdigest()}  files/{n}"
        for n in sorted(os.listdir("files"))
    ]
    assert lines == expected
''',
)

task(
    name="zip-bundle",
    category="archives",
    instruction="Create a zip archive `bundle.zip` containing `report.txt` and `data.csv` at the top level of the archive.",
    files={"report.txt": "quarterly report\n", "data.csv": "a,b\n1,2\n"},
    solution="python3 -m zipfile -c bundle.zip report.txt data.csv\n",
    checks='''
import zipfile


def test_zip():
    with zipfile.ZipFile("bundle.zip") as archive:
        assert sorted(archive.namelist()) == ["data.csv", "report.txt"]
        assert archive.read("data.csv") == b"a,b\\n1,2\\n"
''',
)

task(
    name="split-file",
    category="file-operations",
    instruction="Split `big.txt` into pieces of 10 lines each inside a new directory `parts`, named `chunk_aa`, `chunk_ab`, ... (as `split -l 10` names them with the prefix `parts/chunk_`).",
    files={"big.txt": "".join(f"line {i}\n" for i in range(1, 26))},
    solution="mkdir -p parts\nsplit -l 10 big.txt parts/chunk_\n",
    checks='''
def test_chunks():
    assert sorted(os.listdir("parts")) == ["chunk_aa", "chunk_ab", "chunk_ac"]
    assert len(Path("parts/chunk_ab").read_text().splitlines()) == 10
    assert Path("parts/chunk_ac").read_text() == "".join(f"line {i}\\n" for i in range(21, 26))
''',
)

r = _rng("join-files")
IDS = sorted(f"u{n:02d}" for n in r.sample(range(1, 40), 12))
SCORED = sorted(r.sample(IDS, 8) + ["u99"])
task(
    name="join-files",
    category="text-processing",
    instruction="`ids.txt` has lines `id name` and `scores.txt` has lines `id score`, both sorted by id. Write `joined.txt` with a line `id name score` for every id present in both files, in id order.",
    files={
        "ids.txt": "".join(f"{i} {r.choice(NAMES)}\n" for i in IDS),
        "scores.txt": "".join(f"{i} {r.randint(0, 100)}\n" for i in SCORED),
    },
    solution="join ids.txt scores.txt > joined.txt\n",
    checks='''
def test_join():
    names = dict(line.split() for line in Path("ids.txt").read_text().splitlines())
    scores = dict(line.split() for line in Path("scores.txt").read_text().splitlines())
    expected = [f"{i} {names[i]} {scores[i]}" for i in sorted(set(names) & set(scores))]
    assert Path("joined.txt").read_text().splitlines() == expected
''',
)

task(
    name="extension-report",
    category="file-operations",
    instruction="Count the files under `mixed/` (recursively) by extension (the text after the last dot). Write `report.txt` with one line `extension count` per extension, sorted by extension.",
    files={
        "mixed/a.py": "", "mixed/b.py": "", "mixed/c.txt": "", "mixed/sub/d.py": "", "mixed/sub/e.md": "",
        "mixed/sub/deep/f.txt": "", "mixed/sub/deep/g.txt": "",
    },
    solution="find mixed -type f | sed 's/.*\\.//' | LC_ALL=C sort | uniq -c | awk '{print $2, $1}' > report.txt\n",
    checks='''
def test_report():
    assert Path("report.txt").read_text().splitlines() == ["md 1", "py 3", "txt 3"]
''',
)

task(
    name="reverse-lines",
    category="text-processing",
    layout="harbor",
    instruction="Write the lines of `lines.txt` in reverse order (last line first) to `reversed.txt`.",
    files={"lines.txt": "".join(f"{w}\n" for w in WORDS[:9])},
    solution="tac lines.txt > reversed.txt\n",
    checks='''
def test_reversed():
    assert Path("reversed.txt").read_text().splitlines() == Path("lines.txt").read_text().splitlines()[::-1]
''',
)

task(
    name="clean-tmp",
    category="file-operations",
    instruction="Delete every file whose name ends in `.tmp` anywhere under the current directory. Keep all other files.",
    files={"a.tmp": "", "keep.txt": "keep\n", "src/b.tmp": "", "src/main.c": "int main;\n", "src/x/y/c.tmp": "", "src/x/y/z.txt": "z\n"},
    solution="find . -type f -name '*.tmp' -delete\n",
    checks='''
def test_no_tmp_left():
    left = [os.path.join(d, f) for d, _, fs in os.walk(".") for f in fs if f.endswith(".tmp")]
    assert left == []


def test_others_kept():
    assert Path("keep.txt").is_file() and Path("src/main.c").is_file() and Path("src/x/y/z.txt").is_file()
''',
)

task(
    name="greet-script",
    category="scripting",
    instruction="Write an executable shell script `greet.sh`: `./greet.sh NAME` prints `Hello, NAME!` and `./greet.sh` with no argument prints `Hello, world!`.",
    solution="cat > greet.sh <<'EOF'\n#!/bin/sh\necho \"Hello, ${1:-world}!\"\nEOF\nchmod +x greet.sh\n",
    checks='''
def run(*args):
    return subprocess.run(["./greet.sh", *args], capture_output=True, text=True).stdout


def test_named():
    assert run("Ada") == "Hello, Ada!\\n"


def test_default():
    assert run() == "Hello, world!\\n"
''',
)

task(
    name="base64-decode",
    category="data-processing",
    instruction="`secret.b64` is base64-encoded. Decode it into `secret.txt`.",
    files={"secret.b64": base64.b64encode(b"the password is swordfish\n").decode() + "\n"},
    solution="base64 -d secret.b64 > secret.txt\n",
    checks='''
def test_decoded():
    assert Path("secret.txt").read_text() == "the password is swordfish\\n"
''',
)

task(
    name="largest-file",
    category="file-operations",
    instruction="Write the name (just the file name, no directory) of the largest file in `data/` to `largest.txt`.",
    files={"data/small.dat": "x" * 10, "data/huge.dat": "x" * 5000, "data/medium.dat": "x" * 700},
    solution="ls -S data | head -n 1 > largest.txt\n",
    checks='''
def test_largest():
    assert Path("largest.txt").read_text().strip() == "huge.dat"
''',
)

task(
    name="line-slice",
    category="text-processing",
    layout="harbor",
    instruction="Write lines 11 to 20 (inclusive, counting from 1) of `server.log` to `slice.txt`.",
    files={"server.log": "".join(f"{i:03d} request served\n" for i in range(1, 41))},
    solution="sed -n '11,20p' server.log > slice.txt\n",
    checks='''
def test_slice():
    assert Path("slice.txt").read_text().splitlines() == Path("server.log").read_text().splitlines()[10:20]
''',
)

task(
    name="csv-filter",
    category="data-processing",
    instruction="From `people.csv` (columns name, age, city), write `adults.csv` with the header line and every row whose age is at least 30, in the original order.",
    files={"people.csv": PEOPLE},
    solution="awk -F, 'NR == 1 || $2 >= 30' people.csv > adults.csv\n",
    checks='''
def test_filtered():
    lines = Path("people.csv").read_text().splitlines()
    expected = [lines[0]] + [row for row in lines[1:] if int(row.split(",")[1]) >= 30]
    assert Path("adults.csv").read_text().splitlines() == expected
''',
)

task(
    name="tabs-to-spaces",
    category="text-processing",
    instruction="Replace every tab character in `code.txt` with four spaces, editing the file in place.",
    files={"code.txt": "def f():\n\treturn 1\n\nif x:\n\t\tpass\n"},
    solution="sed -i 's/\\t/    /g' code.txt\n",
    checks='''
def test_spaces():
    assert Path("code.txt").read_text() == "def f():\\n    return 1\\n\\nif x:\\n        pass\\n"
''',
)

r = _rng("ip-counts")
IPS = [f"10.0.{r.randint(0, 2)}.{r.randint(1, 4)}" for _ in range(60)]
task(
    name="ip-counts",
    category="text-processing",
    instruction="Each line of `access.log` starts with a client IP address. Write `ip_counts.txt` with one line `ip count` per distinct IP, sorted by count (highest first), ties broken by IP in byte order.",
    files={"access.log": "".join(f"{ip} - - \"GET /{r.choice(WORDS)} HTTP/1.1\" 200\n" for ip in IPS)},
    solution="awk '{print $1}' access.log | LC_ALL=C sort | uniq -c | LC_ALL=C sort -k1,1nr -k2,2 | awk '{print $2, $1}' > ip_counts.txt\n",
    checks='''
from collections import Counter


def test_counts():
    counts = Counter(line.split()[0] for line in Path("access.log").read_text().splitlines())
    expected = [f"{ip} {n}" for ip, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    assert Path("ip_counts.txt").read_text().splitlines() == expected
''',
)

task(
    name="env-file",
    category="scripting",
    instruction="`template.env` lists variable names as `KEY=` lines. `values.txt` has lines `KEY value`. Create `.env` with one `KEY=value` line per key of the template, in template order, taking values from `values.txt` (an empty value when a key has none there).",
    files={"template.env": "DB_HOST=\nDB_PORT=\nDEBUG=\nSECRET_KEY=\n", "values.txt": "DB_PORT 5432\nDB_HOST localhost\nSECRET_KEY s3cr3t\nUNUSED x\n"},
    solution="python3 - <<'EOF'\nvalues = dict(line.split(' ', 1) for line in open('values.txt').read().splitlines())\nkeys = [line.split('=')[0] for line in open('template.env').read().splitlines() if line]\nopen('.env', 'w').write(''.join(f'{k}={values.get(k, \"\")}\\n' for k in keys))\nEOF\n",
    checks='''
def test_env():
    assert Path(".env").read_text() == "DB_HOST=localhost\\nDB_PORT=5432\\nDEBUG=\\nSECRET_KEY=s3cr3t\\n"
''',
)

task(
    name="wc-json",
    category="data-processing",
    instruction="Write `stats.json`, a JSON object with the integer fields `lines`, `words` and `chars` for `essay.txt`, with the values `wc -l`, `wc -w` and `wc -c` report.",
    files={"essay.txt": "Shells are small.\nPipes join them into\nlarger tools, one line at a time.\n"},
    solution="printf '{\"lines\": %d, \"words\": %d, \"chars\": %d}\\n' $(wc -l < essay.txt) $(wc -w < essay.txt) $(wc -c < essay.txt) > stats.json\n",
    checks='''
import json


def test_stats():
    text = Path("essay.txt").read_text()
    assert json.loads(Path("stats.json").read_text()) == {
        "lines": text.count("\\n"),
        "words": len(text.split()),
        "chars": len(text.encode()),
    }
''',
)

task(
    name="backup-rotate",
    category="file-operations",
    instruction="In `backups/` keep only the 3 newest backups: files are named `backup-YYYYMMDD.tar`; delete the older ones (by the date in the name). Other files in `backups/` stay.",
    files={
        **{f"backups/backup-2025010{d}.tar": f"{d}\n" for d in (1, 3, 4, 6, 8)},
        "backups/README": "keep me\n",
    },
    solution="ls backups/backup-*.tar | sort | head -n -3 | xargs rm -f\n",
    checks='''
def test_rotated():
    assert sorted(os.listdir("backups")) == [
        "README", "backup-20250104.tar", "backup-20250106.tar", "backup-20250108.tar",
    ]
''',
)

task(
    name="path-inventory",
    category="file-operations",
    layout="harbor",
    instruction="Write `inventory.txt` listing every regular file under `site/` as a path relative to `site/` (e.g. `css/main.css`), one per line, sorted in byte order.",
    files={"site/index.html": "<html/>\n", "site/css/main.css": "body{}\n", "site/js/app.js": "1\n", "site/js/lib/x.js": "2\n"},
    solution="(cd site && find . -type f | sed 's|^\\./||' | LC_ALL=C sort) > inventory.txt\n",
    checks='''
def test_inventory():
    assert Path("inventory.txt").read_text().splitlines() == ["css/main.css", "index.html", "js/app.js", "js/lib/x.js"]
''',
)
