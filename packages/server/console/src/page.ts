/**
 * What every page of the console is to the router (main.ts): an element to show, a refresh the
 * poll calls every 2 s, and a destroy when the route changes. Its own module so that the pages
 * import this type and not the router that imports them.
 */
export interface Page {
  readonly element: HTMLElement;
  refresh(): Promise<void>;
  destroy(): void;
}
