/** The rungs of the ablation ladder, in the order a request meets them (ladder-server.ts says what each adds). */
export const LADDER_RUNGS = ['https', 'http2', 'service', 'log', 'metrics', 'limiter', 'validation', 'queue'] as const;
export type LadderRung = (typeof LADDER_RUNGS)[number];
