import { createContext, useContext, type ReactNode } from 'react';
import type { Whoami } from './api';

const Ctx = createContext<Whoami | null>(null);

export function SessionProvider({ me, children }: { me: Whoami; children: ReactNode }) {
  return <Ctx.Provider value={me}>{children}</Ctx.Provider>;
}

/** Whether the signed-in role holds a permission: pages hide what it may not do (the server still decides). */
export function useCan(): (permission: string) => boolean {
  const me = useContext(Ctx);
  return (p) => me?.permissions.includes(p) ?? false;
}

export function useMe(): Whoami | null {
  return useContext(Ctx);
}
