// Grammars for response formats, compiled once per distinct schema: a labelling batch sends the same schema on
// every line, and compiling a JSON-schema grammar costs far more than a request's sampling.
import type { Llama, LlamaGrammar } from "node-llama-cpp";
import type { SamplingParams } from "../types.js";
import { toGrammarSchema } from "./json-schema.js";

const MAX_CACHED = 64;

/**
 * node-llama-cpp's number rules (3.22) take exponents of up to 16 digits, so a model could write `4E+5297816680`:
 * valid JSON, but no double holds it (a parser reads Infinity, and writing it back gives `null`, which breaks the
 * schema), and an "integer" with a negative exponent is no integer. Each rule is rewritten: an integer has no
 * exponent and at most 15 digits (every one exact in a double), any other number an exponent of at most two
 * digits (at most about 1e115). Each rule is matched whole, so a library whose rules differ fails the grammar
 * tests (tests/engine/grammars.int.test.ts) instead of passing unbounded numbers.
 */
const BOUNDED_RULES: ReadonlyArray<readonly [string, string]> = [
  [
    'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
    'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,14})',
  ],
  [
    'fractional-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
    'fractional-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?',
  ],
  // The json_object grammar (llama.cpp's json.gbnf).
  [
    'number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws',
    'number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})? ws',
  ],
];

/** The grammar's text with every number rule bounded as above; lines that are no number rule are kept. */
export function boundedNumbers(gbnf: string): string {
  return gbnf
    .split("\n")
    .map((line) => BOUNDED_RULES.find(([from]) => line === from)?.[1] ?? line)
    .join("\n");
}

export class Grammars {
  private readonly cache = new Map<string, Promise<LlamaGrammar>>();

  constructor(private readonly llama: Llama) {}

  get(format: NonNullable<SamplingParams["format"]>): Promise<LlamaGrammar> {
    const key = format.type === "json_object" ? "" : JSON.stringify(format.type === "one_of" ? format : format.schema);
    let grammar = this.cache.get(key);
    if (grammar) {
      // Most recently used last, so the oldest is the one dropped.
      this.cache.delete(key);
    } else {
      grammar =
        format.type === "one_of"
          ? // JSON string literals are GBNF string literals for the names OpenAI allows ([A-Za-z0-9_-]).
            this.llama.createGrammar({ grammar: `root ::= ${format.values.map((v) => JSON.stringify(v)).join(" | ")}` })
          : this.json(format);
      // A schema that failed to compile is not kept: the next request gets the same error, not a stale promise.
      grammar.catch(() => this.cache.delete(key));
      if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value as string);
    }
    this.cache.set(key, grammar);
    return grammar;
  }

  /** node-llama-cpp's JSON grammar for the format, its numbers bounded, with its own stops and trimming. */
  private async json(format: Extract<NonNullable<SamplingParams["format"]>, { type: "json_object" | "json_schema" }>) {
    const base =
      format.type === "json_object"
        ? await this.llama.getGrammarFor("json")
        : // The cast only picks one of the generic's overloads; any GbnfJsonSchema is taken at run time.
          await this.llama.createGrammarForJsonSchema(
            toGrammarSchema(format.schema, "response_format.json_schema.schema") as { type: "string" },
          );
    return this.llama.createGrammar({
      grammar: boundedNumbers(base.grammar),
      stopGenerationTriggers: base.stopGenerationTriggers,
      trimWhitespaceSuffix: base.trimWhitespaceSuffix,
    });
  }
}
