/**
 * The purchase event the lifecycle suites send: a data set, an id, a timestamp of now, a value, and
 * user data (left out when empty). One definition, so that every suite sends the same shape.
 */
export interface PurchaseEvent {
  readonly data_set_id: string;
  readonly id: string;
  readonly timestamp: number;
  readonly event_type: 'purchase';
  readonly value: number;
  readonly currency_code: string;
  readonly source: string;
  readonly user_data?: Record<string, unknown>;
  readonly [field: string]: unknown;
}

export function purchaseEvent(
  dataSetId: string,
  id: string,
  userData: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
): PurchaseEvent {
  return {
    data_set_id: dataSetId,
    id,
    timestamp: Math.floor(Date.now() / 1000),
    event_type: 'purchase',
    value: 10,
    currency_code: 'USD',
    source: 'website',
    ...(Object.keys(userData).length > 0 ? { user_data: userData } : {}),
    ...extra,
  };
}
