// Fastify's type provider for TypeBox schemas: a route's request body and query string are typed
// from the schemas it validates them with, so a handler reads `request.body` as the hook's request
// type without a cast. (The published @fastify/type-provider-typebox targets @sinclair/typebox,
// not the `typebox` package the contract is written in; this is all of it that the types need.)
import type { FastifyTypeProvider } from 'fastify';
import type { Static, TSchema } from 'typebox';

export interface TypeBoxTypeProvider extends FastifyTypeProvider {
  readonly validator: this['schema'] extends TSchema ? Static<this['schema']> : unknown;
  readonly serializer: this['schema'] extends TSchema ? Static<this['schema']> : unknown;
}
