// What the console's page gives its modules besides the DOM: uPlot, loaded by a classic script before them.
declare const uPlot: any;
