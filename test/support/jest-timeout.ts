// Jest reads testTimeout only from the root config and ignores it with
// `projects`; set it per test file instead. Slow cases pass their own.
import { jest } from '@jest/globals';

jest.setTimeout(60_000);
