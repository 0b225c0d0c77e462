"""Hand-written programs per language for the language tests and bench/languages.py.

HELLO prints "hello"; FIZZBUZZ reads n and prints FizzBuzz 1..n; COMPILE_ERROR does not compile (or, for the
interpreted ones, does not parse); RUNTIME_ERROR fails at run time with a non-zero exit; LOOP never ends.
"""

from __future__ import annotations

LANGUAGES = ("c", "cpp", "java", "go", "rust", "javascript", "typescript", "bash", "php", "ruby", "lua", "perl",
             "scala", "csharp")

HELLO = {
    "c": '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n',
    "cpp": '#include <iostream>\nint main() { std::cout << "hello" << std::endl; }\n',
    "java": 'public class Main {\n  public static void main(String[] a) { System.out.println("hello"); }\n}\n',
    "go": 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n',
    "rust": 'fn main() { println!("hello"); }\n',
    "javascript": 'console.log("hello");\n',
    "typescript": 'const greeting: string = "hello";\nconsole.log(greeting);\n',
    "bash": 'echo hello\n',
    "php": '<?php\necho "hello\\n";\n',
    "ruby": 'puts "hello"\n',
    "lua": 'print("hello")\n',
    "perl": 'print "hello\\n";\n',
    "scala": 'object Main {\n  def main(args: Array[String]): Unit = println("hello")\n}\n',
    "csharp": 'public class Program {\n  public static void Main() { System.Console.WriteLine("hello"); }\n}\n',
}

FIZZBUZZ = {
    "c": """#include <stdio.h>
int main(void) {
  int n; if (scanf("%d", &n) != 1) return 1;
  for (int i = 1; i <= n; i++) {
    if (i % 15 == 0) puts("FizzBuzz"); else if (i % 3 == 0) puts("Fizz");
    else if (i % 5 == 0) puts("Buzz"); else printf("%d\\n", i);
  }
  return 0;
}
""",
    "cpp": """#include <iostream>
int main() {
  int n; std::cin >> n;
  for (int i = 1; i <= n; i++) {
    if (i % 15 == 0) std::cout << "FizzBuzz\\n"; else if (i % 3 == 0) std::cout << "Fizz\\n";
    else if (i % 5 == 0) std::cout << "Buzz\\n"; else std::cout << i << "\\n";
  }
}
""",
    "java": """import java.util.Scanner;

public class FizzBuzz {
  public static void main(String[] args) {
    int n = new Scanner(System.in).nextInt();
    StringBuilder sb = new StringBuilder();
    for (int i = 1; i <= n; i++) {
      sb.append(i % 15 == 0 ? "FizzBuzz" : i % 3 == 0 ? "Fizz" : i % 5 == 0 ? "Buzz" : String.valueOf(i)).append('\\n');
    }
    System.out.print(sb);
  }
}
""",
    "go": """package main

import "fmt"

func main() {
\tvar n int
\tfmt.Scan(&n)
\tfor i := 1; i <= n; i++ {
\t\tswitch {
\t\tcase i%15 == 0:
\t\t\tfmt.Println("FizzBuzz")
\t\tcase i%3 == 0:
\t\t\tfmt.Println("Fizz")
\t\tcase i%5 == 0:
\t\t\tfmt.Println("Buzz")
\t\tdefault:
\t\t\tfmt.Println(i)
\t\t}
\t}
}
""",
    "rust": """use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let n: u32 = s.trim().parse().unwrap();
    for i in 1..=n {
        match (i % 3, i % 5) {
            (0, 0) => println!("FizzBuzz"),
            (0, _) => println!("Fizz"),
            (_, 0) => println!("Buzz"),
            _ => println!("{}", i),
        }
    }
}
""",
    "javascript": """const n = parseInt(require("fs").readFileSync(0, "utf8").trim(), 10);
const out = [];
for (let i = 1; i <= n; i++) {
  out.push(i % 15 === 0 ? "FizzBuzz" : i % 3 === 0 ? "Fizz" : i % 5 === 0 ? "Buzz" : String(i));
}
console.log(out.join("\\n"));
""",
    "typescript": """import * as fs from "fs";

const n: number = parseInt(fs.readFileSync(0, "utf8").trim(), 10);
const out: string[] = [];
for (let i = 1; i <= n; i++) {
  out.push(i % 15 === 0 ? "FizzBuzz" : i % 3 === 0 ? "Fizz" : i % 5 === 0 ? "Buzz" : String(i));
}
console.log(out.join("\\n"));
""",
    "bash": """read -r n
for ((i = 1; i <= n; i++)); do
  if (( i % 15 == 0 )); then echo FizzBuzz; elif (( i % 3 == 0 )); then echo Fizz
  elif (( i % 5 == 0 )); then echo Buzz; else echo "$i"; fi
done
""",
    "php": """<?php
$n = intval(trim(fgets(STDIN)));
for ($i = 1; $i <= $n; $i++) {
  echo $i % 15 == 0 ? "FizzBuzz" : ($i % 3 == 0 ? "Fizz" : ($i % 5 == 0 ? "Buzz" : $i)), "\n";
}
""",
    "ruby": """n = STDIN.read.to_i
(1..n).each { |i| puts(i % 15 == 0 ? "FizzBuzz" : i % 3 == 0 ? "Fizz" : i % 5 == 0 ? "Buzz" : i) }
""",
    "lua": """local n = tonumber(io.read("l"))
for i = 1, n do
  if i % 15 == 0 then print("FizzBuzz") elseif i % 3 == 0 then print("Fizz")
  elseif i % 5 == 0 then print("Buzz") else print(i) end
end
""",
    "perl": """my $n = <STDIN>;
chomp $n;
for my $i (1 .. $n) {
  print $i % 15 == 0 ? "FizzBuzz" : $i % 3 == 0 ? "Fizz" : $i % 5 == 0 ? "Buzz" : $i, "\n";
}
""",
    "scala": """object FizzBuzz extends App {
  val n = scala.io.StdIn.readLine().trim.toInt
  for (i <- 1 to n)
    println(if (i % 15 == 0) "FizzBuzz" else if (i % 3 == 0) "Fizz" else if (i % 5 == 0) "Buzz" else i.toString)
}
""",
    "csharp": """using System;

public class Program {
  public static void Main(string[] args) {
    int n = int.Parse(Console.In.ReadToEnd().Trim());
    for (int i = 1; i <= n; i++)
      Console.WriteLine(i % 15 == 0 ? "FizzBuzz" : i % 3 == 0 ? "Fizz" : i % 5 == 0 ? "Buzz" : i.ToString());
  }
}
""",
}

COMPILE_ERROR = {
    "c": "int main(void) { return undefined_name; }\n",
    "cpp": "int main() { std::vector<int> v; return v.size() }\n",
    "java": "public class Main { public static void main(String[] a) { int x = \"s\"; } }\n",
    "go": "package main\n\nfunc main() { x := 1 }\n",
    "rust": "fn main() { let x: i32 = \"s\"; }\n",
    "javascript": "function f( { return 1; }\n",
    "typescript": "const x: number = ;\n",
    "bash": "if then fi\n",
    "php": "<?php\nfunction f( { return 1; }\n",
    "ruby": "def f(\n  1 +\nend end\n",
    "lua": "function f( return 1 end\n",
    "perl": "sub f { return 1;\n",
    "scala": "object Main { def main(args: Array[String]): Unit = { val x: Int = \"s\" } }\n",
    "csharp": "public class Program { public static void Main() { int x = \"s\"; } }\n",
}

RUNTIME_ERROR = {
    "c": "#include <stdlib.h>\nint main(void) { abort(); }\n",
    "cpp": '#include <stdexcept>\nint main() { throw std::runtime_error("boom"); }\n',
    "java": 'public class Main { public static void main(String[] a) { throw new IllegalStateException("boom"); } }\n',
    "go": 'package main\n\nfunc main() { panic("boom") }\n',
    "rust": 'fn main() { let v: Vec<i32> = Vec::new(); println!("{}", v[3]); }\n',
    "javascript": 'throw new Error("boom");\n',
    "typescript": 'const f = (): never => { throw new Error("boom"); };\nf();\n',
    "bash": 'echo start\nexit 3\n',
    "php": '<?php\nthrow new Exception("boom");\n',
    "ruby": 'raise "boom"\n',
    "lua": 'error("boom")\n',
    "perl": 'die "boom\\n";\n',
    "scala": 'object Main extends App {\n  throw new IllegalStateException("boom")\n}\n',
    "csharp": ('public class Program {\n  public static void Main() {\n'
               '    throw new System.InvalidOperationException("boom");\n  }\n}\n'),
}

LOOP = {
    "c": "int main(void) { volatile unsigned long i = 0; for (;;) i++; }\n",
    "cpp": "int main() { volatile unsigned long i = 0; for (;;) i++; }\n",
    "java": "public class Main { public static void main(String[] a) { long i = 0; while (true) i++; } }\n",
    "go": "package main\n\nfunc main() {\n\ti := 0\n\tfor {\n\t\ti++\n\t}\n}\n",
    "rust": "fn main() {\n    let mut i: u64 = 1;\n"
            "    while i != 0 { i = i.wrapping_mul(6364136223846793005).wrapping_add(1) | 1; }\n"
            "    println!(\"{}\", i);\n}\n",
    "javascript": "let i = 0; for (;;) i++;\n",
    "typescript": "let i: number = 0; for (;;) i++;\n",
    "bash": "while :; do :; done\n",
    "php": "<?php\n$i = 0; while (true) $i++;\n",
    "ruby": "i = 0\nloop { i += 1 }\n",
    "lua": "local i = 0\nwhile true do i = i + 1 end\n",
    "perl": "my $i = 0; while (1) { $i++; }\n",
    "scala": "object Main extends App {\n  var i = 0L\n  while (true) i += 1\n}\n",
    "csharp": "public class Program {\n  public static void Main() { long i = 0; while (true) i++; }\n}\n",
}


def fizzbuzz(n: int) -> str:
    return "".join("FizzBuzz\n" if i % 15 == 0 else "Fizz\n" if i % 3 == 0 else "Buzz\n" if i % 5 == 0
                   else f"{i}\n" for i in range(1, n + 1))
