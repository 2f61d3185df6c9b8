"""`envsnap demo`: the STORY's steps, each printed as the command a user types and what it
said (part of the CLI, so it may print)."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from envsnap.cli.options import examples, exit_codes
from envsnap.errors import ExitCode

if TYPE_CHECKING:   # the demo loads when the command runs, not for the parser
    from envsnap.cli.options import Commands
    from envsnap.demo.scene import Scene, Step


def register(commands: Commands) -> None:
    demo = commands.add_parser(
        "demo", help="the STORY (docs/STORY.md: a silent git pull slowed a GPU server), "
                     "live, on this machine (no SSH, no GPU)",
        epilog=examples("envsnap demo", "envsnap demo --keep")
        + exit_codes((ExitCode.OK, "every step said what it should"),
                          (ExitCode.USAGE, "usage error: bad argument"),
                          (ExitCode.HOST, "a step failed (its output is shown)")))
    demo.add_argument("--keep", action="store_true",
                      help="keep the demo's folder afterwards (default: delete it)")
    demo.set_defaults(run=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from envsnap.demo import scene as demo

    print(demo.INTRODUCTION + "\n")
    print("Setting up the STORY: a sglang checkout with an upstream, a venv whose "
          "sitecustomize sets NCCL_*, a worker started with the tuned NCCL env, and "
          "`envsnap watch` keeping the host's history in the background ...")
    scene = demo.set_up()
    try:
        print(f"in {scene.root}")
        print(f"$ {demo.shown(demo.watch_args(scene))} &\n")
        for step in demo.steps(scene):
            if not run_demo_step(scene, step, args.keep):
                return ExitCode.HOST
    finally:
        scene.stop(keep=args.keep)
    print("That was the STORY: one diff instead of twenty commands, and the checkout is "
          "back where the numbers were good." + (f" (kept: {scene.root})" if args.keep else ""))
    return ExitCode.OK


def run_demo_step(scene: Scene, step: Step, keep: bool) -> bool:
    from envsnap.demo import scene as demo

    print(f"== {step.title}")
    if step.note:
        print(f"   ({step.note})")
    if step.prepare:
        step.prepare()
    print(f"$ {step.shown}", flush=True)
    result = demo.run_step(scene, step)
    sys.stdout.write(demo.runnable_here(scene, result.stdout, keep) + "\n")
    if result.returncode not in step.expect:
        sys.stderr.write(f"envsnap: error: demo step failed (exit {result.returncode})\n")
        return False
    return True
