"""Where the megakernel's SASS comes from: instructions per source file and per source line, from a
-lineinfo build (kernels.build always adds it). Runs where nvdisasm is (the H200's CUDA toolkit):

    cuobjdump -xelf all lib/libfleet_kernels.so          # writes *.cubin into the working directory
    nvdisasm -g -c -fun fd_megakernel X.sm_90a.cubin | python docs/next/code_size.py --top 40

Each instruction counts for the innermost file and line that nvdisasm names above it ("//## File
..., line N"). With nvdisasm -gi, whose line records also name where the code was inlined, --by-task
counts it for the outermost hip/tasks/*.cu of that chain instead (the task kind whose code it is).
"""
import argparse
import collections
import re
import sys

LINE = re.compile(r'//## File "([^"]+)", line (\d+)')
PLACE = re.compile(r'"([^"]+)", line (\d+)')
INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(\S.*?);")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=30, help="how many source lines to list")
    parser.add_argument("--by-task", action="store_true",
                        help="count inlined code for the outermost task file of its inline chain (nvdisasm -gi)")
    args = parser.parse_args()
    where = ("?", 0)
    per_file, per_line = collections.Counter(), collections.Counter()
    total = 0
    for text in sys.stdin:
        m = LINE.search(text)
        if m:
            chain = [(f.split("/hip/")[-1], int(n)) for f, n in PLACE.findall(text)]
            tasks = [c for c in chain if c[0].startswith(("tasks/", "runtime/../tasks/")) and c[0].endswith(".cu")]
            where = tasks[-1] if args.by_task and tasks else chain[0]
            continue
        if INSTR.match(text):
            total += 1
            per_file[where[0]] += 1
            per_line[where] += 1
    print(f"{total} instructions ({total * 16 / 1024:.0f} KB)")
    for name, n in per_file.most_common():
        print(f"{n:8d} {100 * n / max(total, 1):5.1f} %  {name}")
    print("-- lines")
    for (name, line), n in per_line.most_common(args.top):
        print(f"{n:8d}  {name}:{line}")


if __name__ == "__main__":
    main()
