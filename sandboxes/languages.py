"""The one registry of languages: every fact the service knows about a language is a field of its entry here.

`LANGUAGES` holds them all, Python included; the other tables (the supported names, the test kinds of each
language, SandboxFusion's aliases, the linted languages) are derived from it by the functions at the end. Adding
a language is one entry here plus its packages in the image (sandboxes/image/).

Python runs in the runner's own forked interpreter (`in_process`: no compile step, no argv). Everything else only
builds Jobs; the commands run inside the sandbox as the job uid (the runner knows no language). A compile job runs
the compiler through inside/compile.py, which returns the artefacts; a run job writes them into the job's
directory and starts the program.

Memory: `Limits.memory_mb` is RLIMIT_AS. Native programs (C, C++, Rust, Bash) get the item's limit as address
space. Runtimes that reserve far more address space than they use (the JVM, V8, Go's compiler) cannot start under
a small RLIMIT_AS, so they get `as_headroom_mb` on top, their heap is capped by the runtime's own flag (-Xmx and
--max-old-space-size in run_argv, GOMEMLIMIT in run_env), and a run whose peak RSS (kernel accounting) exceeds the
item's limit is reported as memory_limit; the sandbox's memory cgroup stays the hard backstop.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

from .types import Limits, RunJob

INSIDE = "/opt/rewardbox"
NODE_MODULES = "/usr/local/lib/rewardbox-node/node_modules"
OUT = "out"  # compile output directory (relative to the job's working directory)
ARTEFACT_CAP = 32 << 20  # base64 in the compile report must fit one 64 MiB frame of the runner's protocol
# Runs a compiled binary: files written into the job dir are not executable (umask 077, no mode on the wire).
RUN_BINARY = ("./main",)  # written executable (run_files: "exec"), so no shell and chmod start with every run
# V8's stack in KiB: deep recursion gets a RangeError well before the thread's 8 MiB stack would overflow.
NODE_STACK = "--stack-size=4096"
# Java's class path: the job directory and the jars SandboxFusion's image puts there (javatuples, from Debian).
JAVA_CLASS_PATH = ".:/usr/share/java/javatuples.jar"
# Scala 2.11 (Debian's): compiled by scalac, run on the JVM with its library (its `scala` runner script fails on
# JDK 17's class loader).
SCALA_CLASS_PATH = ".:/usr/share/java/scala-library.jar"
JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Xshare:auto",
             "-XX:ReservedCodeCacheSize=64m", "-XX:CompressedClassSpaceSize=64m", "-XX:MaxMetaspaceSize=192m")


@dataclass(frozen=True)
class Language:
    name: str
    source: str  # file name of the program in the job directory
    compile_argv: tuple[str, ...] = ()  # compiler, or syntax checker for interpreted languages ({src}: the source)
    run_argv: tuple[str, ...] = ()  # ({mem}: the item's memory limit in MiB, {main}: Java's main class)
    version_argv: tuple[str, ...] = ()  # prints the toolchain version (part of the compile cache key)
    compile_memory_mb: int = 1024  # RLIMIT_AS of the compile job (+ as_headroom_mb for VM compilers)
    compile_headroom_mb: int = 0
    as_headroom_mb: int = 0  # address space added on top of the item's memory limit when running (see above)
    env: dict[str, str] = field(default_factory=dict)
    runs_source: bool = False  # the compile step only checks the source (node --check, bash -n); runs read it
    main_of: Callable[[str], str] | None = None  # the {main} placeholder: Java's public class, Scala's object
    source_named_after_main: bool = False  # Java: the public class must be in a file of its name
    run_env: dict[str, str] = field(default_factory=dict)  # env of a run job ({mem}: the memory limit in MiB)
    aliases: tuple[str, ...] = ()  # other names SandboxFusion clients send for it (python3, nodejs)
    test_kinds: tuple[str, ...] = ("io",)  # every language takes io tests (stdin -> stdout); some take more
    in_process: bool = False  # Python: runs in the runner's forked interpreter, not as a compiled/exec'd program
    linter: str | None = None  # the lint engine inside the sandbox ("pylint", "eslint"); None: quality is null
    flag_scanner: str | None = None  # which static scanner of graders/flags.py reads its source, if any
    measurable: bool = False  # efficiency is measured (the measuring job alternates in-process programs)
    # `function` tests of an exec language: the host that loads the program under the candidate uid and serves the
    # judge's calls ({mem}: the memory limit in MiB). Python's judge loads it in process.
    judge_host_argv: tuple[str, ...] = ()

    def source_name(self, code: str) -> str:
        if self.source_named_after_main:
            return self.main_class(code) + PurePosixPath(self.source).suffix
        return self.source

    def compile_job(self, code: str, timeout_s: float, memory_mb: int | None = None) -> RunJob:
        src, main = self.source_name(code), self.main_class(code)
        argv = [a.format(src=src, main=main) for a in self.compile_argv]
        mem = (memory_mb or self.compile_memory_mb) + self.compile_headroom_mb
        limits = Limits(wall_s=timeout_s, total_s=timeout_s, cpu_s=timeout_s, memory_mb=mem,
                        output_bytes=ARTEFACT_CAP * 3 // 2, file_size_mb=ARTEFACT_CAP >> 20, nofile=256, nproc=128)
        program = {"argv": ["/usr/bin/python3", "-S", f"{INSIDE}/compile.py", OUT, str(ARTEFACT_CAP), "--", *argv]}
        return RunJob(program=program, files={src: code}, env=self.env or None, limits=limits)

    def run_files(self, code: str, artefacts: dict[str, str]) -> dict:
        """The job files of a run: the artefacts (base64), or the source itself for interpreted languages."""
        if self.runs_source:
            return {self.source_name(code): code}
        return {name: {"b64": data, "exec": True} for name, data in artefacts.items()}

    def run_argv_for(self, code: str, memory_mb: int) -> list[str]:
        main = self.main_class(code)
        return [a.format(mem=memory_mb, main=main) for a in self.run_argv]

    def main_class(self, code: str) -> str:
        """What the run command starts (the {main} placeholder), for the languages that name one."""
        return self.main_of(code) if self.main_of else ""

    def run_limits(self, limits: Limits) -> Limits:
        if not self.as_headroom_mb:
            return limits
        # VMs start a dozen threads, and RLIMIT_NPROC counts threads; the sandbox's pids limit still caps the total.
        return replace(limits, memory_mb=limits.memory_mb + self.as_headroom_mb, nofile=max(limits.nofile, 256),
                       nproc=max(limits.nproc, 128))

    def run_job(self, code: str, artefacts: dict[str, str], stdin: str, limits: Limits) -> RunJob:
        env = {**self.env, **{k: v.format(mem=limits.memory_mb) for k, v in self.run_env.items()}}
        return RunJob(program={"argv": self.run_argv_for(code, limits.memory_mb)},
                   files=self.run_files(code, artefacts), stdin=stdin, env=env or None,
                   limits=self.run_limits(limits))

    def judge_host_argv_for(self, memory_mb: int) -> list[str]:
        return [a.format(mem=memory_mb) for a in self.judge_host_argv]

    def version_job(self) -> RunJob:
        return RunJob(program={"argv": list(self.version_argv)}, env=self.env or None,
                   limits=Limits(wall_s=30, total_s=30, cpu_s=30, memory_mb=self.compile_memory_mb
                                 + self.compile_headroom_mb, nofile=256, nproc=128))


_JAVA_PUBLIC_CLASS = re.compile(r"^\s*public\s+(?:(?:final|abstract|static)\s+)*class\s+([A-Za-z_$][\w$]*)", re.M)


def java_main_class(code: str) -> str:
    """Java wants a public class in a file of its name: the first public top-level class, else Main."""
    m = _JAVA_PUBLIC_CLASS.search(code)
    return m.group(1) if m else "Main"


_SCALA_OBJECT = re.compile(r"^\s*object\s+([A-Za-z_][\w]*)", re.M)


def scala_main_object(code: str) -> str:
    """The object to run: the first top-level `object` (as SandboxFusion picks it), else Main."""
    m = _SCALA_OBJECT.search(code)
    return m.group(1) if m else "Main"


# glibc gives each thread a malloc arena of up to 64 MiB of address space: VMs start many threads.
_VM_ENV = {"MALLOC_ARENA_MAX": "2"}
# Go: no -trimpath (the precompiled std would be rebuilt: 14 s instead of 0.45 s); cgo off, no network.
_GO_ENV = {**_VM_ENV, "CGO_ENABLED": "0", "GOPROXY": "off", "GO111MODULE": "off", "GOTOOLCHAIN": "local"}

# Programs `require`/`import` the npm libraries of the image (lodash, ...: sandboxes/image/node/package.json).
_NODE_ENV = {"NODE_PATH": NODE_MODULES}
# `function` tests: candidate_host.js loads the (compiled) solution.js and answers the judge's calls.
_NODE_JUDGE_HOST = ("node", NODE_STACK, "--max-old-space-size={mem}", f"{INSIDE}/candidate_host.js", "solution.js")

LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        # Its test kinds beyond io run as judge jobs (sandboxes/inside/judge.py); repo items run a repository's
        # pytest suite (graders/repo.py).
        Language("python", "solution.py", aliases=("python3",),
                 test_kinds=("assert", "function", "io", "pytest", "repo"), in_process=True, linter="pylint",
                 flag_scanner="python", measurable=True),
        Language("c", "main.c", ("gcc", "-std=gnu17", "-O2", "-pipe", "-o", f"{OUT}/main", "{src}", "-lm"),
                 RUN_BINARY, ("gcc", "--version")),
        Language("cpp", "main.cpp", ("g++", "-std=gnu++17", "-O2", "-pipe", "-o", f"{OUT}/main", "{src}"),
                 RUN_BINARY, ("g++", "--version")),
        Language("rust", "main.rs", ("rustc", "--edition", "2021", "-O", "-C", "strip=symbols", "-o", f"{OUT}/main",
                                     "{src}"), RUN_BINARY, ("rustc", "--version"), compile_memory_mb=2048,
                 test_kinds=("io", "rust_test")),
        Language("go", "main.go", ("go", "build", "-ldflags=-s -w", "-o", f"{OUT}/main", "{src}"),
                 RUN_BINARY, ("go", "version"), compile_memory_mb=2048, as_headroom_mb=1024, env=_GO_ENV,
                 run_env={"GOMEMLIMIT": "{mem}MiB"}),
        Language("java", "Main.java", ("javac", "-J-Xmx512m", *(f"-J{f}" for f in JVM_FLAGS), "-encoding", "UTF-8",
                                       "-nowarn", "-cp", JAVA_CLASS_PATH, "-d", OUT, "{src}"),
                 # -ea: `assert` statements are checked, as SandboxFusion and MultiPL-E run Java.
                 ("java", "-ea", "-Xmx{mem}m", "-Xss16m", *JVM_FLAGS, "-cp", JAVA_CLASS_PATH, "{main}"),
                 ("javac", "-J-Xmx64m", *(f"-J{f}" for f in JVM_FLAGS), "-version"),
                 compile_memory_mb=512, compile_headroom_mb=1536, as_headroom_mb=1536, env=_VM_ENV,
                 main_of=java_main_class, source_named_after_main=True),
        Language("scala", "main.scala", ("scalac", "-J-Xmx512m", *(f"-J{f}" for f in JVM_FLAGS), "-nowarn", "-d", OUT,
                                         "{src}"),
                 ("java", "-ea", "-Xmx{mem}m", "-Xss16m", *JVM_FLAGS, "-cp", SCALA_CLASS_PATH, "{main}"),
                 ("scalac", "-J-Xmx64m", *(f"-J{f}" for f in JVM_FLAGS), "-version"),
                 compile_memory_mb=512, compile_headroom_mb=1536, as_headroom_mb=1536, env=_VM_ENV,
                 main_of=scala_main_object),
        # C# on Mono (Debian's; SandboxFusion runs .NET 8): mcs compiles to one assembly, mono runs it. -d:DEBUG
        # keeps Debug.Assert checks, as `dotnet run`'s default Debug build does; inside/cs_entry.cs makes a failed
        # one end the program, as on .NET.
        Language("csharp", "Program.cs", ("mcs", "-d:DEBUG", "-nowarn:105", "-main:RewardboxEntry",
                                          f"-out:{OUT}/main.exe", "{src}", f"{INSIDE}/cs_entry.cs"),
                 ("mono", "main.exe"), ("mono", "--version"), compile_memory_mb=512, compile_headroom_mb=1024,
                 as_headroom_mb=1024, env=_VM_ENV),
        Language("javascript", "solution.js", ("node", "--check", "{src}"),
                 ("node", "--max-old-space-size={mem}", NODE_STACK, "solution.js"), ("node", "--version"),
                 compile_memory_mb=256, compile_headroom_mb=1024, as_headroom_mb=1024, env=_NODE_ENV,
                 runs_source=True, aliases=("nodejs",), test_kinds=("function", "io", "repo"), linter="eslint",
                 flag_scanner="javascript", judge_host_argv=_NODE_JUDGE_HOST),  # repo: node:test (repo_node.py)
        Language("typescript", "solution.ts", ("node", f"{INSIDE}/ts_compile.js", "{src}", f"{OUT}/solution.js"),
                 ("node", "--max-old-space-size={mem}", NODE_STACK, "solution.js"),
                 ("node", "-p", f"'node ' + process.version + ' typescript ' + require('{NODE_MODULES}/typescript')"
                  ".version"), compile_memory_mb=512, compile_headroom_mb=1024, as_headroom_mb=1024,
                 env=_NODE_ENV, test_kinds=("function", "io"), linter="eslint", flag_scanner="javascript",
                 judge_host_argv=_NODE_JUDGE_HOST),
        Language("bash", "solution.sh", ("bash", "-n", "{src}"), ("bash", "solution.sh"), ("bash", "--version"),
                 compile_memory_mb=256, runs_source=True),
        # Interpreted languages SandboxFusion users send (Debian packages; test libraries: luaunit, Test::Deep,
        # Data::Compare, Ruby's test-unit). The compile step is the interpreter's own syntax check.
        Language("php", "solution.php", ("php", "-l", "{src}"), ("php", "solution.php"), ("php", "--version"),
                 compile_memory_mb=256, runs_source=True),
        Language("ruby", "solution.rb", ("ruby", "-c", "{src}"), ("ruby", "solution.rb"), ("ruby", "--version"),
                 compile_memory_mb=512, as_headroom_mb=256, env=_VM_ENV, runs_source=True),
        Language("lua", "solution.lua", ("luac5.4", "-p", "{src}"), ("lua5.4", "solution.lua"), ("lua5.4", "-v"),
                 compile_memory_mb=256, runs_source=True),
        Language("perl", "solution.pl", ("perl", "-c", "{src}"), ("perl", "solution.pl"), ("perl", "--version"),
                 compile_memory_mb=256, runs_source=True),
    )
}

# -- the tables derived from the registry (a registry is passed in by the tests, which add a fake entry)

Registry = Mapping[str, Language]

EXEC_LANGUAGES: dict[str, Language] = {name: lang for name, lang in LANGUAGES.items() if not lang.in_process}
"""The languages whose programs the runner execs (compiled and cached by sandboxes/builds.py): all but Python."""


def supported_languages(registry: Registry = LANGUAGES) -> tuple[str, ...]:
    """The names /reward accepts, in registry order (Python first)."""
    return tuple(registry)


def accepted_test_kinds(registry: Registry = LANGUAGES) -> dict[str, list[str]]:
    """language -> the test kinds it takes (what validation allows and /health lists)."""
    return {name: list(lang.test_kinds) for name, lang in registry.items()}


def language_aliases(registry: Registry = LANGUAGES) -> dict[str, str]:
    """Every name a SandboxFusion client may send (a language's own name and its aliases) -> the language."""
    return {alias: name for name, lang in registry.items() for alias in (name, *lang.aliases)}


def linted_languages(registry: Registry = LANGUAGES) -> tuple[str, ...]:
    """The languages with a linter: quality is null for the others."""
    return tuple(name for name, lang in registry.items() if lang.linter)
