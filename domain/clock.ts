// OpenAI objects carry Unix times in whole seconds.
export const unixNow = (): number => Math.floor(Date.now() / 1000);
