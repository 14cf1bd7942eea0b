#!/usr/bin/env python3
"""Compares a folder with an ExampleStorage manifest: every folder, and every file's size and sha256.

Usage: compare_tree.py FOLDER MANIFEST.json   (exit 0 when identical, 1 otherwise)
"""
import hashlib
import json
import os
import sys


def read_tree(root):
    folders, files = set(), {}
    for folder, subfolders, names in os.walk(root):
        for name in subfolders:
            folders.add(os.path.relpath(os.path.join(folder, name), root))
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                data = handle.read()
            files[os.path.relpath(path, root)] = (len(data), hashlib.sha256(data).hexdigest())
    return folders, files


def main():
    root, manifest_path = sys.argv[1], sys.argv[2]
    with open(manifest_path) as handle:
        manifest = json.load(handle)
    expected_folders = set(manifest["folders"])
    expected_files = {path: (info["size"], info["sha256"]) for path, info in manifest["files"].items()}
    folders, files = read_tree(root)
    problems = [f"missing folder {p}" for p in sorted(expected_folders - folders)]
    problems += [f"extra folder {p}" for p in sorted(folders - expected_folders)]
    problems += [f"missing file {p}" for p in sorted(set(expected_files) - set(files))]
    problems += [f"extra file {p}" for p in sorted(set(files) - set(expected_files))]
    problems += [f"different file {p}" for p in sorted(expected_files) if p in files and files[p] != expected_files[p]]
    if problems:
        print("DIFFERENT:\n  " + "\n  ".join(problems))
        return 1
    print(f"identical: {len(folders)} folders and {len(files)} files match {os.path.basename(manifest_path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
