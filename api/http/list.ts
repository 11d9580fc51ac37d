// OpenAI's list envelope around a page from a store.
import type { Page } from "../../domain/ports.js";

export interface ListObject<T> {
  object: "list";
  data: T[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

export function listObject<T extends { id: string }>(page: Page<T>): ListObject<T> {
  return {
    object: "list",
    data: page.data,
    first_id: page.data[0]?.id ?? null,
    last_id: page.data.at(-1)?.id ?? null,
    has_more: page.has_more,
  };
}
