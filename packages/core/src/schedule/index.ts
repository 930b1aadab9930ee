export * from './timetable.js';
