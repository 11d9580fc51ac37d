// A byte-level BPE vocabulary in the GPT-2 style, small enough to generate on the fly:
//   ids 0..255   one token per byte (GPT-2's bytes_to_unicode symbols), so every string round-trips;
//   ids 256..258 ChatML control tokens;
//   the rest     lowercase "words" (with and without a leading space) plus one merge each, so
//                English-ish text tokenizes to a realistic ~3-4 characters per token.
import { type GgufValue, gguf } from "./writer.js";

export const SPECIAL_TOKENS = {
  endOfText: { id: 256, text: "<|endoftext|>" },
  imStart: { id: 257, text: "<|im_start|>" },
  imEnd: { id: 258, text: "<|im_end|>" },
} as const;

const FIRST_WORD_ID = 259;
/** The smallest vocabulary: bytes and control tokens, no words. */
export const MIN_VOCAB_SIZE = FIRST_WORD_ID;

// llama.cpp token types (llama_token_type)
const TOKEN_TYPE_NORMAL = 1;
const TOKEN_TYPE_CONTROL = 3;

/**
 * ChatML with Hermes-style function calling (the format Qwen 2.5 and many fine-tunes use), so the generated
 * model exercises a chat template's own tool format: tools listed in the system turn, calls as
 * <tool_call>{"name", "arguments"}</tool_call>, results as <tool_response> in a user turn.
 */
export const CHATML_TEMPLATE = [
  // trim_blocks is on (as in Hugging Face's rendering), so a newline right after a tag is written as {{ "\n" }}.
  "{% if tools %}{{ '<|im_start|>system\\n' }}{% if messages[0].role == 'system' %}{{ messages[0].content + '\\n\\n' }}{% endif %}",
  "# Tools\n\nYou may call one or more functions. Their signatures are within <tools></tools>:\n<tools>",
  "{% for tool in tools %}{{ '\\n' + (tool | tojson) }}{% endfor %}{{ '\\n</tools>\\n\\n' }}",
  "For each call, return a JSON object with the function name and arguments within <tool_call></tool_call>:\n",
  '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n',
  "{% elif messages[0].role == 'system' %}{{ '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}{% endif %}",
  "{% for message in messages %}",
  "{% if message.role == 'system' and loop.first %}",
  "{% elif message.role == 'assistant' %}<|im_start|>assistant{% if message.content %}{{ '\\n' + message.content }}{% endif %}",
  "{% if message.tool_calls %}{% for call in message.tool_calls %}{% if call.function %}{% set call = call.function %}{% endif %}",
  `{{ '\\n<tool_call>\\n{"name": "' + call.name + '", "arguments": ' + (call.arguments | tojson) + '}\\n</tool_call>' }}`,
  "{% endfor %}{% endif %}{{ '<|im_end|>\\n' }}",
  "{% elif message.role == 'tool' %}",
  "{% if loop.first or messages[loop.index0 - 1].role != 'tool' %}<|im_start|>user{% endif %}",
  "{{ '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}",
  "{% if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{ '<|im_end|>\\n' }}{% endif %}",
  "{% else %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{% endif %}",
  "{% endfor %}",
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
].join("");

/** GPT-2's reversible byte -> printable-character map. */
export function bytesToUnicode(): string[] {
  const direct = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const out: string[] = [];
  let next = 256;
  for (let b = 0; b < 256; b++) out.push(String.fromCodePoint(direct(b) ? b : next++));
  return out;
}

export interface ByteLevelVocabulary {
  tokens: string[];
  tokenTypes: Int32Array;
  merges: string[];
}

export function buildVocabulary(vocabSize: number): ByteLevelVocabulary {
  if (!Number.isInteger(vocabSize) || vocabSize < MIN_VOCAB_SIZE) {
    throw new Error(`vocabulary size must be an integer >= ${MIN_VOCAB_SIZE}, got ${vocabSize}`);
  }
  const byteChars = bytesToUnicode();
  const tokens = [...byteChars, ...Object.values(SPECIAL_TOKENS).map((t) => t.text)];
  const tokenTypes = new Int32Array(vocabSize).fill(TOKEN_TYPE_NORMAL);
  for (const t of Object.values(SPECIAL_TOKENS)) tokenTypes[t.id] = TOKEN_TYPE_CONTROL;
  const merges: string[] = [];
  const space = byteChars[0x20]!; // "Ġ"
  for (const word of lowercaseWords()) {
    if (tokens.length >= vocabSize) break;
    for (const text of word.length === 1 ? [space + word] : [space + word, word]) {
      if (tokens.length >= vocabSize) break;
      // Merge the word's longest proper prefix (already a token: words come shortest first) with its last letter.
      merges.push(`${text.slice(0, -1)} ${text.slice(-1)}`);
      tokens.push(text);
    }
  }
  return { tokens, tokenTypes, merges };
}

/** a..z, aa..zz, aaa..zzz, ... */
function* lowercaseWords(): Generator<string> {
  for (let length = 1; ; length++) {
    const letters = new Array<number>(length).fill(0);
    for (;;) {
      yield String.fromCharCode(...letters.map((l) => 97 + l));
      let i = length - 1;
      while (i >= 0 && letters[i] === 25) letters[i--] = 0;
      if (i < 0) break;
      letters[i]!++;
    }
  }
}

/** tokenizer.* metadata for a GPT-2-style BPE tokenizer with a ChatML chat template. */
export function tokenizerMetadata(vocabSize: number): Record<string, GgufValue> {
  const vocab = buildVocabulary(vocabSize);
  return {
    "tokenizer.ggml.model": gguf.string("gpt2"),
    "tokenizer.ggml.pre": gguf.string("default"),
    "tokenizer.ggml.tokens": gguf.strings(vocab.tokens),
    "tokenizer.ggml.token_type": gguf.int32s(vocab.tokenTypes),
    "tokenizer.ggml.merges": gguf.strings(vocab.merges),
    "tokenizer.ggml.bos_token_id": gguf.uint32(SPECIAL_TOKENS.endOfText.id),
    // <|im_end|> ends a chat turn; llama.cpp also treats <|endoftext|> as end-of-generation.
    "tokenizer.ggml.eos_token_id": gguf.uint32(SPECIAL_TOKENS.imEnd.id),
    "tokenizer.ggml.padding_token_id": gguf.uint32(SPECIAL_TOKENS.endOfText.id),
    "tokenizer.ggml.add_bos_token": gguf.bool(false),
    "tokenizer.chat_template": gguf.string(CHATML_TEMPLATE),
  };
}
