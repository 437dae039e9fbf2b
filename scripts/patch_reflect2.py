"""Make the vendored github.com/modern-go/reflect2 v1.0.1 work with Go >= 1.18.

Go 1.18 changed the runtime's ``reflect.mapiterinit``: it no longer allocates and returns the
iterator but fills one the caller passes, whose layout must match the runtime's ``hiter``.
reflect2 v1.0.1 links against the old signature, so kube-apiserver crashes (``fault ...
mapiterinit``) the first time it JSON-encodes a map, i.e. when a custom resource is created.
This applies the same change reflect2 v1.0.2 made. Usage: patch_reflect2.py VENDOR_DIR
"""

import sys
from pathlib import Path

OLD_DECLARATION = "func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer) *hiter\n"
NEW_DECLARATION = "func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer, it *hiter)\n"
OLD_HITER_FIELDS = "\t// rest fields are ignored\n}"
NEW_HITER_FIELDS = """\tt           unsafe.Pointer
\th           unsafe.Pointer
\tbuckets     unsafe.Pointer
\tbptr        unsafe.Pointer
\toverflow    *[]unsafe.Pointer
\toldoverflow *[]unsafe.Pointer
\tstartBucket uintptr
\toffset      uint8
\twrapped     bool
\tB           uint8
\ti           uint8
\tbucket      uintptr
\tcheckBucket uintptr
}"""
OLD_ITERATE = """\treturn &UnsafeMapIterator{
\t\thiter:      mapiterinit(type2.rtype, *(*unsafe.Pointer)(obj)),"""
NEW_ITERATE = """\tvar it hiter
\tmapiterinit(type2.rtype, *(*unsafe.Pointer)(obj), &it)
\treturn &UnsafeMapIterator{
\t\thiter:      &it,"""


def replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if new in text:
        return  # already patched
    if text.count(old) != 1:
        sys.exit(f"{path}: expected the reflect2 v1.0.1 code, found something else; cannot patch")
    path.write_text(text.replace(old, new))


def main() -> None:
    vendor = Path(sys.argv[1])
    replace_once(vendor / "unsafe_link.go", OLD_DECLARATION, NEW_DECLARATION)
    replace_once(vendor / "unsafe_link.go", OLD_HITER_FIELDS, NEW_HITER_FIELDS)
    replace_once(vendor / "unsafe_map.go", OLD_ITERATE, NEW_ITERATE)


if __name__ == "__main__":
    main()
