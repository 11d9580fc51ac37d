// Every function of a source file with its length in lines, read from the TypeScript syntax tree, and the marker a
// comment right above a function starts with to say why it must stay one piece; read by
// tests/function-length.unit.test.ts.
import { readFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { repoRoot } from "./repo-root.js";

/** A comment right above a function that starts so says why the function is kept whole, and lets it be long. */
export const ONE_PIECE = "// one piece:";

export interface FunctionSpan {
  /** The file relative to the repository root, `/`-separated. */
  file: string;
  /** The line the function starts on, from 1. */
  line: number;
  /** The name it is known by: its own, the variable or property it is assigned to, or what it is passed to. */
  name: string;
  /** Lines of its text, nested functions included. */
  lines: number;
  /** A comment right above it starts with ONE_PIECE. */
  onePiece: boolean;
}

type FunctionNode = ts.FunctionLikeDeclaration & { body: ts.Node };

function isFunctionWithBody(node: ts.Node): node is FunctionNode {
  return (
    (ts.isFunctionDeclaration(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isConstructorDeclaration(node) ||
      ts.isGetAccessorDeclaration(node) ||
      ts.isSetAccessorDeclaration(node) ||
      ts.isArrowFunction(node) ||
      ts.isFunctionExpression(node)) &&
    node.body !== undefined
  );
}

/** What a function is called where it is written: its name, else the binding or call that holds it. */
function nameOf(node: FunctionNode, source: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) return `${(node.parent as ts.ClassLikeDeclaration).name?.text ?? "class"}.constructor`;
  if (node.name) {
    const own = node.name.getText(source);
    const owner = ts.isClassLike(node.parent) ? node.parent.name?.text : undefined;
    return owner ? `${owner}.${own}` : own;
  }
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))
    return parent.name.getText(source);
  if (ts.isCallExpression(parent) || ts.isNewExpression(parent)) {
    const callee = parent.expression.getText(source).replace(/\s+/g, "");
    const first = parent.arguments?.[0];
    const label = first && first !== node && ts.isStringLiteralLike(first) ? ` ${first.text}` : "";
    return `(callback of ${callee}${label})`;
  }
  return "(anonymous)";
}

/** The statement or member a function's leading comments sit on: itself, or the declaration that holds it. */
function commentHolder(node: FunctionNode): ts.Node {
  let at: ts.Node = node;
  for (;;) {
    const parent = at.parent;
    if (ts.isVariableDeclaration(parent) || ts.isVariableDeclarationList(parent) || ts.isVariableStatement(parent)) at = parent;
    else if (ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent) || ts.isExportAssignment(parent)) at = parent;
    else return at;
  }
}

function hasOnePieceComment(node: FunctionNode, source: ts.SourceFile): boolean {
  const holder = commentHolder(node);
  const comments = ts.getLeadingCommentRanges(source.text, holder.getFullStart()) ?? [];
  return comments.some((c) => source.text.slice(c.pos, c.end).startsWith(ONE_PIECE));
}

/** Every function with a body in one file's text. */
export function functionSpans(file: string, text: string): FunctionSpan[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const spans: FunctionSpan[] = [];
  const visit = (node: ts.Node) => {
    if (isFunctionWithBody(node)) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      spans.push({
        file,
        line: first + 1,
        name: nameOf(node, source),
        lines: last - first + 1,
        onePiece: hasOnePieceComment(node, source),
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return spans;
}

/** Every function of the given repository files, read from disk. */
export function repoFunctionSpans(files: readonly string[]): FunctionSpan[] {
  return files.flatMap((file) => functionSpans(file, readFileSync(path.join(repoRoot, file), "utf8")));
}
