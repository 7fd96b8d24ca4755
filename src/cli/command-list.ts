/**
 * @module
 * Every command that runs something, as the program has it (name, flags by long name, the function it runs),
 * in the order of `--help`: what tests check every command's help and reach against. Built when imported, so
 * it is a module of its own, off the path every command starts by (./commands.ts).
 */
import { COMMAND_MODULES } from "./command-modules.js";
import { DESCRIPTION, NAME } from "./program-run.js";
import { listCommands, type CommandEntry } from "./program.js";

export const COMMANDS: readonly CommandEntry[] = listCommands({ name: NAME, version: "", description: DESCRIPTION }, COMMAND_MODULES);
