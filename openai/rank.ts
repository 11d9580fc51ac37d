// The ranking endpoints a batch line may name beside OpenAI's, as vLLM's run_batch takes them: /v1/rerank in
// Cohere's and Jina's shape (a query, documents, top_n; results by index with relevance_score, best first) and
// /v1/score in vLLM's (text_1 against text_2: one against many, or pairwise). Both are pairs of a query and a
// document scored by a reranker; every backend answers them with these bodies.
import { z } from "zod";
import { int, model, opt } from "./bodies.js";
import { hexId } from "./ids.js";

/** Documents (or text_2 entries) in one line at most: as many as an embeddings line's inputs. */
export const MAX_RANK_DOCUMENTS = 2048;

const text = z.string().min(1);
const document = z.union([text, z.strictObject({ text })], { error: "each document must be a non-empty string or {text}" });

export const RerankBodySchema = z.strictObject({
  model,
  query: text,
  documents: z.array(document).min(1).max(MAX_RANK_DOCUMENTS),
  top_n: opt(int.min(1)),
  return_documents: opt(z.boolean()),
});
export type RerankBody = z.infer<typeof RerankBodySchema>;

const texts = z.union([text, z.array(text).min(1).max(MAX_RANK_DOCUMENTS)], {
  error: "must be a non-empty string or a non-empty list of them",
});

export const ScoreBodySchema = z.strictObject({ model, text_1: texts, text_2: texts }).superRefine((b, ctx) => {
  // vLLM's pairing: one text_1 against every text_2, or the lists pairwise.
  if (Array.isArray(b.text_1) && (!Array.isArray(b.text_2) || b.text_2.length !== b.text_1.length))
    ctx.addIssue({
      code: "custom",
      path: ["text_2"],
      message: "text_2 must be a list as long as text_1 when text_1 is a list (or text_1 one string scored against each text_2)",
    });
});
export type ScoreBody = z.infer<typeof ScoreBodySchema>;

export type RankRequest = { endpoint: "/v1/rerank"; body: RerankBody } | { endpoint: "/v1/score"; body: ScoreBody };

/** The (query, document) pairs a line scores, in its order. */
export function rankPairs(r: RankRequest): Array<[string, string]> {
  if (r.endpoint === "/v1/rerank") return r.body.documents.map((d) => [r.body.query, documentText(d)]);
  const right = Array.isArray(r.body.text_2) ? r.body.text_2 : [r.body.text_2];
  return right.map((t2, i) => [Array.isArray(r.body.text_1) ? r.body.text_1[i] : r.body.text_1, t2]);
}

const documentText = (d: RerankBody["documents"][number]) => (typeof d === "string" ? d : d.text);

/** The line's answer from each pair's score (its rankPairs order) and the prompt tokens read. */
export function rankBody(r: RankRequest, modelName: string, scores: readonly number[], promptTokens: number): Record<string, unknown> {
  const usage = { prompt_tokens: promptTokens, total_tokens: promptTokens };
  if (r.endpoint === "/v1/score")
    return {
      id: `score-${hexId()}`,
      object: "list",
      created: Math.floor(Date.now() / 1000),
      model: modelName,
      data: scores.map((score, index) => ({ index, object: "score", score })),
      usage: { ...usage, completion_tokens: 0 },
    };
  const results = scores
    .map((relevance_score, index) => ({
      index,
      relevance_score,
      ...(r.body.return_documents ? { document: { text: documentText(r.body.documents[index]) } } : {}),
    }))
    // Best first; equal scores keep the documents' order.
    .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
    .slice(0, r.body.top_n ?? undefined);
  return { id: `rerank-${hexId()}`, model: modelName, results, usage };
}
