export interface ProbeActivities {
  greet(name: string): Promise<string>;
}

export function createProbeActivities(): ProbeActivities {
  return {
    async greet(name: string): Promise<string> {
      return `hello, ${name}`;
    },
  };
}
