// Grammars for response formats, compiled once per distinct schema: a labelling batch sends the same schema on
// every line, and compiling a JSON-schema grammar costs far more than a request's sampling.
import type { Llama, LlamaGrammar } from "node-llama-cpp";
import { toGrammarSchema } from "./json-schema.js";
import type { SamplingParams } from "./types.js";

const MAX_CACHED = 64;

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
        format.type === "json_object"
          ? this.llama.getGrammarFor("json")
          : format.type === "one_of"
            ? // JSON string literals are GBNF string literals for the names OpenAI allows ([A-Za-z0-9_-]).
              this.llama.createGrammar({ grammar: `root ::= ${format.values.map((v) => JSON.stringify(v)).join(" | ")}` })
            : // The cast only picks one of the generic's overloads; any GbnfJsonSchema is taken at run time.
              this.llama.createGrammarForJsonSchema(
                toGrammarSchema(format.schema, "response_format.json_schema.schema") as { type: "string" },
              );
      // A schema that failed to compile is not kept: the next request gets the same error, not a stale promise.
      grammar.catch(() => this.cache.delete(key));
      if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value as string);
    }
    this.cache.set(key, grammar);
    return grammar;
  }
}
